#!/bin/bash
# CPU and thread wake-ups per request of one otlpgate at a fixed low rate: a sink, otlpgate with
# its defaults (and any extra flags), and `otlpbench load` sending 100-span requests at RATE a
# second, 8 in flight; after 3 s it reads the CPU time of every otlpgate thread from
# /proc/PID/task/*/schedstat and their voluntary switches, waits 8 s, reads them again and
# prints both per request. Finer than the sweep's /proc/PID/stat ticks (10 ms) at 50 requests
# a second. Run from the repository's root after make build:
#
#   bench/per-request.sh grpc|http RATE [otlpgate flags...]
#
# GATE names the otlpgate binary (default bin/otlpgate), OTLPBENCH the otlpbench binary
# (default bin/otlpbench). It listens on 127.0.0.1:14317-14319 and :14390. Alternate two
# binaries (GATE=...) a few times: one run alone says little on a shared machine.
set -eu
proto=$1 rate=$2
shift 2
gate=${GATE:-bin/otlpgate}
bench=${OTLPBENCH:-bin/otlpbench}
logs=$(mktemp -d)
"$bench" sink -listen 127.0.0.1:14319 -report 1h >"$logs/sink.log" 2>&1 &
sink=$!
"$gate" -grpc.listen 127.0.0.1:14317 -http.listen 127.0.0.1:14318 -admin.listen 127.0.0.1:14390 \
	-dest "name=sink,endpoint=127.0.0.1:14319" "$@" >"$logs/gate.log" 2>&1 &
g=$!
trap 'kill $sink $g 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$logs"' EXIT
sleep 1
case $proto in
grpc) p=v1 target=127.0.0.1:14317 ;;
http) p=http-proto target=127.0.0.1:14318 ;;
*) echo "per-request.sh: grpc or http, not $proto" >&2; exit 2 ;;
esac
"$bench" load -protocol "$p" -target "$target" -rate "$rate" -inflight 8 -batches $((rate * 12)) >"$logs/load.log" 2>&1 &
load=$!
sleep 3
cpu() { cat /proc/"$g"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }
wakes() { cat /proc/"$g"/task/*/status | awk '/^voluntary_ctxt/ {s += $2} END {printf "%d", s}'; }
c0=$(cpu) w0=$(wakes)
sleep 8
c1=$(cpu) w1=$(wakes)
kill "$load" 2>/dev/null || true
n=$((rate * 8))
echo "$proto $rate/s: $(((c1 - c0) / 1000 / n)) CPU-µs a request, $(awk -v w=$((w1 - w0)) -v n=$n 'BEGIN {printf "%.2f", w / n}') thread wake-ups a request"
