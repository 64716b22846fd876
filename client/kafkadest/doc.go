// Package kafkadest is otlpgate's Kafka destination (-dest protocol=kafka): it produces every
// batch as records of one topic per signal, each record's value an OTLP Export*ServiceRequest
// (the Collector's otlp_proto encoding, or its OTLP/JSON, otlp_json), so that a Collector's
// Kafka receiver, or otlpgate's, reads them unchanged.
//
// A batch is cut, without decoding, into records below max-message-bytes: runs of whole
// resource entries, an entry larger than that cut at its scope entries, a scope entry at its
// items (cut.go). With partition=trace_id the spans of a batch are first split by trace
// (fastpath.Splitter), one record per trace keyed by the trace id in hex, the key the
// Collector's partition_traces_by_id gives, hashed to a partition as the Collector does
// (partition.go). The producer is franz-go's kgo, idempotent, with acks=all.
//
// A batch is reported delivered (Done(true)) only once the brokers acknowledged every record
// of it. A record that fails with a retryable error (a broker down, a leader moving, a timeout)
// is produced again after a backoff, within retry-max-elapsed (no limit with a spool); one the
// brokers refuse for good (too large, invalid) costs its batch, counted by reason. Counts go
// to the client's per-destination series (client.Counts), so that /status.json and the status
// page show the destination as any other, with its last error.
//
// It imports fastpath/, fastpath/pipeline, pool, client and client/filedest (the OTLP/JSON
// writer). One goroutine takes batches off the queue and hands their records to kgo; kgo's
// goroutines call back as the brokers answer; retries wait on timers. Enqueue is safe for
// concurrent use.
package kafkadest
