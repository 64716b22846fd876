# otlpgate build. Every target is bounded in time; `make help` lists them.

GO        ?= go
BIN       := bin
PKG       := github.com/otlpgate/otlpgate

# Code generators, pinned. protoc itself comes from the system (Debian: protobuf-compiler).
PROTOC                   ?= protoc
PROTOC_GEN_GO_VERSION     := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTOC_GEN_VTPROTO_VERSION := v0.6.1-0.20240319094008-0393e58bdf10

# Messages that get a vtprotobuf object pool (the request messages of every service).
VTPROTO_POOL := \
	$(PKG)/proto/opentelemetry/proto/collector/trace/v1.ExportTraceServiceRequest \
	$(PKG)/proto/opentelemetry/proto/collector/metrics/v1.ExportMetricsServiceRequest \
	$(PKG)/proto/opentelemetry/proto/collector/logs/v1.ExportLogsServiceRequest \
	$(PKG)/proto/otep/v1.TraceExportRequest \
	$(PKG)/proto/otep/v1.MetricExportRequest \
	$(PKG)/proto/otep/v1.LogExportRequest \
	$(PKG)/proto/otep/v1.ExportResponse

PROTO_FILES := $(shell find proto -name '*.proto' | sort)

# Linters, pinned; `go run pkg@version` fetches them from the module proxy (no install step).
STATICCHECK_VERSION := v0.8.2
GOVULNCHECK_VERSION := v1.9.0

# helm, pinned, built from its Go module into bin/tools/helm by `make helm`, once: 3.5 CPU-minutes
# and 720 MB of build cache from an empty cache, a second to check after that. go test ./deploy
# lints and renders the chart in deploy/helm with it.
HELM_VERSION := v3.22.0
HELM         := $(BIN)/tools/helm

# h2spec (HTTP/2 conformance), pinned with its dependencies in tools/h2spec/go.mod and built into
# bin/tools/h2spec by `make h2spec-tool`; internal/hostile's TestH2Spec runs it against the
# OTLP/gRPC listener (part of `make test`; it skips, outside CI, while the tool is not built).
H2SPEC_VERSION := v2.2.1+incompatible
H2SPEC         := $(BIN)/tools/h2spec

# The image `make image` builds; its tag is VERSION.
IMAGE ?= otlpgate

# The OpenTelemetry Collector built as the benchmark peer, pinned (its modules come from the proxy).
OTELCOL_BUILDER_VERSION := v0.162.0
PEER_OTELCOL := peer/otelcol/otelcol-peer

# What otlpgate -version prints and otlpgate_build_info exports, from git (the Dockerfile,
# whose build has no .git, passes them as build arguments).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

SCALE    ?= 1
ROUNDS   ?= 3
SCENARIO ?= small
INTAKE   ?= grpc
FUZZTIME ?= 20s
# Go minimizes every new input for up to 60s by default; on targets that run a whole
# connection per input that took the whole FUZZTIME, so new inputs are minimized briefly.
FUZZMINIMIZE ?= 2000x
BENCHTIME ?= 1s
RUN_ARGS ?=

.PHONY: help build static image helm h2spec-tool h2spec run test lint vuln bench docs generate check-generate fuzz tools clean \
	appendix appendix-reference rebalance-chart proxy peer-otelcol bench-peer bench-processing bench-anchor bench-sweep profile profile-diff soak soak-spool

help:
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

build: ## build bin/otlpgate and bin/otlpbench
	$(GO) build -ldflags='$(LDFLAGS)' -o $(BIN)/ ./cmd/...

static: ## build a static bin/static/otlpgate, as the Dockerfile does
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(LDFLAGS)' -o $(BIN)/static/ ./cmd/otlpgate

image: ## build the container image IMAGE:VERSION from the Dockerfile, with VERSION and COMMIT from git
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE):$(VERSION) .

# go version -m reads the module version the binary was built from: a helm of another version
# (an older pin) is built again, one of this version never.
helm: ## build the pinned helm (HELM_VERSION) into bin/tools/helm unless it is there; go test ./deploy needs it
	@if $(GO) version -m $(HELM) 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+helm.sh/helm/v3[[:space:]]+$(HELM_VERSION)[[:space:]]"; then \
		echo "$(HELM) is helm $(HELM_VERSION)"; \
	else \
		echo "building helm $(HELM_VERSION) into $(HELM)"; \
		GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install -ldflags='-s -w' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	fi

run: build ## start otlpgate with working defaults
	./$(BIN)/otlpgate $(RUN_ARGS)

h2spec-tool: ## build the pinned h2spec (H2SPEC_VERSION, tools/h2spec/go.mod) into bin/tools/h2spec unless it is there
	@if $(GO) version -m $(H2SPEC) 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/summerwind/h2spec[[:space:]]+$(H2SPEC_VERSION)[[:space:]]"; then \
		echo "$(H2SPEC) is h2spec $(H2SPEC_VERSION)"; \
	else \
		echo "building h2spec $(H2SPEC_VERSION) into $(H2SPEC)"; \
		cd tools/h2spec && $(GO) build -ldflags='-s -w' -o $(CURDIR)/$(H2SPEC) github.com/summerwind/h2spec/cmd/h2spec; \
	fi

interop-deps: ## the pinned grpc-js peer of internal/interop's tests (npm ci; needs node and npm); .ci/run also installs Debian's python3-grpcio and nghttp2-client
	cd internal/interop/testdata/node && npm ci --no-audit --no-fund

h2spec: h2spec-tool ## HTTP/2 conformance of the OTLP/gRPC listener: h2spec's 145 tests, against the known failures
	$(GO) test -count=1 -v -run '^TestH2Spec$$' ./internal/hostile

test: lint ## gofmt check, go vet, go test -race, then the allocation tests (which -race leaves out)
	$(GO) test -race -count=1 -timeout 15m ./...
	OTLPGATE_TEST_UDS_ENGINE=net $(GO) test -race -count=1 -timeout 10m ./server/uds
	$(GO) test -count=1 -timeout 10m -run "$$(bash .ci/race-free-tests)" ./...

# server/uds runs a second time with its sockets served by -uds.engine=net instead of gnet.
# The allocation tests are built with !race (the race detector allocates): they run in a second,
# plain pass, which selects every test of every file whose build constraint requires !race
# (.ci/race-free-tests reads the constraints, so no such test is left out by its name;
# internal/layout's TestRaceFreePassRunsEveryRaceFreeTest evaluates them as go build does and
# fails on any test the pattern misses).

lint: ## go vet, gofmt check, staticcheck, go.mod/go.sum tidy, and no tracked binary or file over 1 MiB (.ci/check-tracked)
	$(GO) vet ./...
	@bash .ci/check-tracked
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy and commit"; exit 1; }

# govulncheck reads the Go vulnerability database (vuln.go.dev) at run time, so it is not part
# of lint: lint must pass on a machine without that access.
vuln: ## known vulnerabilities in the modules and the Go release otlpgate uses (needs vuln.go.dev)
	$(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) ./...

bench: ## micro-benchmarks of the hot paths
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 20m ./...

tools: ## install the pinned code generators into bin/
	GOBIN=$(CURDIR)/$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CURDIR)/$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$(PROTOC_GEN_VTPROTO_VERSION)

generate: tools ## regenerate Go code from proto/ (needs protoc), then fastpath/walk_gen.go from the schema table
	find proto -name '*.pb.go' -delete
	PATH=$(CURDIR)/$(BIN):$$PATH $(PROTOC) -I proto \
		--go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative \
		--go-vtproto_out=proto --go-vtproto_opt=paths=source_relative \
		--go-vtproto_opt=features=marshal+unmarshal+size+equal+clone+pool \
		$(foreach m,$(VTPROTO_POOL),--go-vtproto_opt=pool=$(m)) \
		$(patsubst proto/%,%,$(PROTO_FILES))
	$(GO) generate ./fastpath

docs: ## regenerate docs/configuration.md, docs/metrics.md and destinations.md's key tables from the flag set, the registered metrics and client's -dest keys
	$(GO) test -count=1 -run '^TestReferenceDocs$$' ./cmd/otlpgate -update

check-generate: generate ## fail when the committed generated code (proto/, fastpath/walk_gen.go) is stale
	@git add -N proto fastpath/walk_gen.go >/dev/null 2>&1; \
	if ! git diff --exit-code --stat -- proto fastpath/walk_gen.go; then \
		echo "generated code is stale: run make generate and commit"; exit 1; fi

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
		done; done

appendix: build ## the spec's Appendix B on otlpgate's client and server (SCALE=0.05 for a quick run)
	mkdir -p profiles
	./$(BIN)/otlpbench appendix -scale $(SCALE) -json profiles/appendix.json -chart profiles/appendix

appendix-reference: ## the reference implementation and otlpgate in alternation, LBTimed/Async/1 (REF=clone of exp-otelproto)
	@test -n "$(REF)" || { echo "REF=path to a clone of github.com/tigrannajaryan/exp-otelproto is required"; exit 2; }
	sh bench/reference/run.sh $(REF) $(ROUNDS)

rebalance-chart: build ## share of requests per gateway through nginx and HAProxy, a gateway added mid-run
	./$(BIN)/otlpbench rebalance -balancer nginx -out profiles/rebalance-nginx
	./$(BIN)/otlpbench rebalance -balancer haproxy -out profiles/rebalance-haproxy

proxy: build ## load -> otlpgate -> sink against load -> sink, small batches, 8 in flight (INTAKE=grpc|http-proto|http-json)
	./$(BIN)/otlpbench proxy -gate ./$(BIN)/otlpgate -intake $(INTAKE) -shape small -inflight 8

peer-otelcol: ## build the OpenTelemetry Collector peer into peer/ (git-ignored)
	mkdir -p peer
	$(GO) run go.opentelemetry.io/collector/cmd/builder@$(OTELCOL_BUILDER_VERSION) --config bench/otelcol/builder.yaml

# Intakes of bench-peer: OTLP/gRPC unary v1, OTLP/HTTP protobuf and OTLP/HTTP JSON. The floor (a
# bare grpc-go forwarder) speaks gRPC only, so it is measured with the grpc intake alone.
PEER_INTAKES ?= grpc http-proto http-json
PEER_ARGS    ?=

bench-peer: build peer-otelcol ## otlpgate vs the Collector: gRPC, HTTP protobuf and HTTP JSON in, small and large batches, 1 and 8 in flight
	@set -e; for intake in $(PEER_INTAKES); do for shape in small large; do for inflight in 1 8; do \
		floor=true; [ $$intake = grpc ] || floor=false; \
		./$(BIN)/otlpbench proxy -gate ./$(BIN)/otlpgate -intake $$intake -shape $$shape -inflight $$inflight \
			-floor=$$floor -peer ./$(PEER_OTELCOL) -peer-args "--config=bench/otelcol/config.yaml" $(PEER_ARGS); \
	done; done; done

# The cost of processing (issue 23, docs/benchmarks.md): otlpgate's CPU per forwarded span with two
# resource attributes set and tenants on (the load sends X-Scope-OrgID as three tenants), against
# plain forwarding under the same load, alternating the two PROCESSING_ROUNDS times per row; gRPC,
# OTLP/HTTP protobuf and JSON in, small and large batches, 8 in flight. PROCESSING_ARGS adds
# otlpbench processing flags (-batches, -proc-args, -intakes, -shapes).
PROCESSING_ROUNDS ?= 5
PROCESSING_ARGS   ?=

bench-processing: build ## otlpgate's CPU-µs per span with -resource.set (2) and -intake.headers against plain forwarding, and the ratio
	./$(BIN)/otlpbench processing -gate ./$(BIN)/otlpgate -rounds $(PROCESSING_ROUNDS) $(PROCESSING_ARGS)

# The anchor (docs/benchmarks.md): each proxy pinned to one CPU with GOMAXPROCS=1, the load and
# the sink on the others, semconv batches at 100/s in an open loop, OTLP/gRPC and OTLP/HTTP in,
# none, gzip and zstd on both hops, against a TCP relay (the floor) in the same run. The
# Collector's column needs `make peer-otelcol` first; without it the column is left out.
ANCHOR_ARGS ?=

bench-anchor: build ## CPU-µs per span of otlpgate and the Collector pinned to one core, as a ratio to a TCP relay (ANCHOR_ARGS=-rounds 3 ...)
	./$(BIN)/otlpbench anchor -gate ./$(BIN)/otlpgate -peer ./$(PEER_OTELCOL) -peer-args "--config=bench/otelcol/config.yaml" $(ANCHOR_ARGS)

# The rate sweep (docs/benchmarks.md): otlpgate and the Collector (batch processor + sending
# queue, and receiver -> exporter) from 1k spans/s to a closed loop, small and semconv batches,
# OTLP/gRPC and OTLP/HTTP in: CPU-µs per span, p50/p99, peak RSS, idle CPU. Without `make
# peer-otelcol` the Collector's columns are left out. SWEEP_ARGS adds otlpbench sweep flags
# (-rates, -duration, -idle, -shapes, -intakes).
SWEEP_ARGS ?=

bench-sweep: build ## CPU-µs per span against rate (1k spans/s to closed loop), latency, peak RSS and idle CPU of otlpgate and the Collector
	./$(BIN)/otlpbench sweep -gate ./$(BIN)/otlpgate -peer ./$(PEER_OTELCOL) -chart profiles/sweep $(SWEEP_ARGS)

profile: build ## capture CPU, allocs and heap profiles of a standard load (SCENARIO=small|large|http|uds|kafka)
	./$(BIN)/otlpbench profile -gate ./$(BIN)/otlpgate -scenario $(SCENARIO) -out profiles

profile-diff: ## compare two CPU profiles: make profile-diff BASE=profiles/a.cpu.pprof NEW=profiles/b.cpu.pprof
	@test -n "$(BASE)" -a -n "$(NEW)" || { echo "usage: make profile-diff BASE=... NEW=..."; exit 2; }
	$(GO) tool pprof -top -diff_base $(BASE) $(NEW)

soak: build ## 10 minutes of mixed load; reports RSS, goroutine and descriptor growth; then the hostile suite's long forms (not in CI)
	./$(BIN)/otlpbench soak -gate ./$(BIN)/otlpgate -duration $${SOAK_DURATION:-10m}
	HOSTILE_LONG=1 $(GO) test -count=1 -timeout 30m ./internal/hostile/

soak-spool: ## the spool's model test on SPOOL_MODEL_N random scripts (default 100000, 10-20 minutes; new seeds each run; not in CI)
	$(GO) test -count=1 -timeout 3h -run '^TestSpoolModel$$' ./spool -spool.model.seed=0 -spool.model.n=$${SPOOL_MODEL_N:-100000} -v

clean:
	rm -rf $(BIN)
