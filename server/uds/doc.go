// Package uds serves the OpenCensus daemon protocol on a unix socket, as the real OpenCensus PHP
// DaemonClient speaks it, and turns what arrives into OTLP for the data path.
//
// It owns the intake's gnet event loops (one connection stays on one loop, so its messages are
// handled in order; connections run in parallel across loops), the per-process stats registry
// (measures, views, reporting period), the aggregation of STATS_RECORD measurements per view and
// tag set, the periodic export of the aggregates as cumulative OTLP metrics, and the conversion
// of TRACE_EXPORT JSON spans into OTLP spans. Metrics are marshalled with the vtprotobuf types,
// spans are encoded straight from the converter's reused structs (spanwire.go, the same bytes
// without an allocation), both into pooled buffers handed to a pipeline.Consumer. Wire framing and payload
// decoding live in codec/ocdaemon.
//
// Goroutines: gnet's event loops run the connection handlers (non-blocking: decoding,
// aggregation under short per-view locks, span conversion and Consume, which never blocks); one
// exporter goroutine wakes every reporting period and when a process ends; when an idle or
// read timeout is set, a sweep goroutine sweeps the connections for expired deadlines and
// hands each expired one to its own event loop to be closed; it sleeps while no connection is
// open (timeout.go). Shutdown stops
// them all and flushes every process's metrics.
//
// Semantics beyond the protocol text:
//   - A process's state lives while a connection of its pid is open (or until PROC_SHUTDOWN);
//     when it ends, its views are exported once more and dropped once that export is admitted
//     (a refusal for want of room keeps it for the next round). Exports go in chunks of at most
//     256KiB, so that a refusal costs only the processes of its chunk.
//   - VIEW_UNREGISTER stops aggregation at once; the view is exported one last time with what it
//     holds. Registering an identical view before that final export revives it with its
//     aggregates, so the per-request register/unregister cycle of PHP keeps one cumulative
//     series.
//   - Series start times and exemplar times are the client's message times; export times come
//     from the server clock.
//   - Distribution buckets follow OTLP: bucket i holds bounds[i-1] < v <= bounds[i].
//
// It imports codec/ocdaemon, fastpath and fastpath/pipeline (the Consumer contract),
// internal/admission (the intake limiter), internal/rawio (the raw reads of -uds.engine=net),
// internal/statusmetrics (the metrics the status page reads),
// pool/ and proto/; it must not import client/, the other servers, cmd/ or bench/.
package uds
