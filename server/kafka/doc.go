// Package kafka owns the Kafka-protocol intake for KIP-714 client telemetry: a TCP (or TLS)
// listener that answers ApiVersions, Metadata (itself as the only broker of a cluster without
// topics), GetTelemetrySubscriptions and PushTelemetry; the client instances and their
// subscriptions, matched on client selectors and reloadable from a file; and the forwarding of
// each accepted push, filtered to its subscribed metric prefixes and labelled with the client's
// identity, to a pipeline.Consumer as an OTLP metrics payload.
//
// It imports fastpath/, pool/, codec/kafkacompress, internal/admission (the intake limiter),
// internal/credfile (TLS), internal/statusmetrics (the metrics the status page reads) and
// proto/; it must not import client/, other server/ packages, cmd/
// or bench/.
//
// The listener has no authentication of its own: anyone who reaches it may push telemetry.
// With -kafka.tls.client-ca only clients holding a certificate that CA signed are served.
//
// Goroutines: Start runs one accept loop, one expiry sweeper and one goroutine per connection.
// A connection's goroutine reads a request, answers it and only then reads the next (between
// requests under the idle timeout, within one under the read timeout), so the
// per-connection state (buffers, decoded requests, client labels) needs no lock. The instance
// registry and the subscription set are shared by all connections and locked or swapped
// atomically; see instances.go and subscriptions.go.
package kafka
