// Package strictsink is an upstream for tests that validates requests the way the OpenTelemetry
// Collector does: an OTLP/gRPC v1 server (the trace, metrics and logs Export services) that
// decodes every request with the Collector's own decoder, the ProtoUnmarshaler of
// go.opentelemetry.io/collector/pdata (ptrace, pmetric, plog), refuses what it refuses with
// INVALID_ARGUMENT, and records what it accepted.
//
// ServeCollectorHTTP puts the Collector's OTLP/HTTP server side (confighttp, with its
// decompression) in front of a test's handler.
//
// Tests of batch isolation deliver to it: an upstream that validates nothing cannot show that
// one client's request costs another client its data, because the batch they share is
// accepted whatever it holds. A Collector refuses such a batch whole.
//
// Only tests import it: pdata is a test-only dependency and must stay out of the otlpgate
// binary (`go version -m bin/otlpgate | grep pdata` finds nothing). It may import codec/ and
// fastpath/ (for the signal names) and nothing else of otlpgate. The gRPC server runs its
// handlers on gRPC's goroutines; every method of Sink is safe for concurrent use.
package strictsink
