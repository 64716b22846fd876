#!/bin/sh
# Runs the Appendix B mode GRPC/Stream/LBTimed/Async/1 of the OTLP proposal's reference
# implementation (github.com/tigrannajaryan/exp-otelproto) and otlpgate's mirror of it in
# alternation, small and large batches, on this machine.
#
# usage: bench/reference/run.sh REPO [ROUNDS]
#   REPO   a clone of github.com/tigrannajaryan/exp-otelproto (its .git, or a bare repository);
#          the module is not on the Go module proxy, so it cannot be fetched here
#   ROUNDS rounds of the four runs (default 3)
#
# The reference is built at commit c8bf5b5 from its vendored modules, with exp-otelproto.patch:
# at that commit the span generator makes ExportTraceServiceRequest, which the async stream client
# does not take, and the server acknowledges every batch with id 0, which the client refuses.
# The patch wraps the request and echoes the id; nothing else changes.
set -eu
repo=$1
rounds=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gitdir=$repo
[ -d "$repo/.git" ] && gitdir=$repo/.git
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git --git-dir="$gitdir" --work-tree="$work" checkout c8bf5b5 -- go.mod go.sum vendor cmd core encodings protoimpls 2>/dev/null ||
	git --git-dir="$gitdir" --work-tree="$work" checkout c8bf5b5 -- go.mod go.sum vendor cmd core protoimpls \
		$(git --git-dir="$gitdir" ls-tree -r --name-only c8bf5b5 encodings | grep -v /testdata/)
(cd "$work" && patch -s -p1 <"$here/exp-otelproto.patch" && go build -mod=vendor -o benchmark ./cmd/benchmark)
(cd "$root" && go build -o bin/ ./cmd/otlpbench)
i=1
while [ "$i" -le "$rounds" ]; do
	echo "round $i"
	"$work/benchmark" -protocol streamlbasync -batches=8000 -spansperbatch=100 -attrperspan=4 | tail -n 1
	"$root/bin/otlpbench" appendix -scale 1 -rtts 20us -shapes small -modes GRPC/Stream/LBTimed/Async/1 | grep -E '^ +GRPC/Stream/LBTimed/Async/1 '
	"$work/benchmark" -protocol streamlbasync -batches=800 -spansperbatch=500 -attrperspan=10 | tail -n 1
	"$root/bin/otlpbench" appendix -scale 1 -rtts 20us -shapes large -modes GRPC/Stream/LBTimed/Async/1 | grep -E '^ +GRPC/Stream/LBTimed/Async/1 '
	i=$((i + 1))
done
