// Package interop is otlpgate's interoperability matrix: the real otlpgate binary, on each of
// its gRPC transports (-grpc.transport=grpc-go|otlpgate on the intake, transport=grpc-go|otlpgate
// on a destination), against gRPC implementations other than the one it is built with:
//
//   - grpc-js (npm @grpc/grpc-js, pinned in testdata/node/package-lock.json) as a client of the
//     intake and as the upstream of a destination;
//   - Python grpcio (Debian's python3-grpcio, the C-core) both ways;
//   - the OpenTelemetry Collector's gRPC client and server (configgrpc, as its OTLP exporter and
//     receiver build them, with pdata's services and its own zstd) both ways;
//   - h2load (Debian's nghttp2-client) driving unary Export calls at the intake.
//
// Each test asserts the exact spans, metrics and log records that came out the other side,
// with gzip (zstd with the Collector and h2load; neither grpc-js nor grpcio has it) and TLS where the peer speaks
// them, messages large enough to cross many frames and flow-control windows, a peer that
// shrinks its window mid-message, and GOAWAY mid-traffic from either side. nginx and HAProxy
// in front of the intake are internal/l7lb's. docs/intakes/otlp-grpc.md lists the cells.
//
// Without a peer the tests skip, saying what to install (make interop-deps installs the
// grpc-js modules); under CI=true they fail instead, since .ci/run installs every peer. The package has no code outside its
// tests. It builds cmd/otlpgate once per run (TestMain) and starts it as a child on loopback.
package interop
