// Package process owns the byte-level processing steps that run on a request after the
// intake's scan and before it joins a batch: resource attribute edits (-resource.set,
// -resource.delete, and -resource.from-peer, the client's address, which fastpath hands each
// entry from the request's Origin), drops by resource attribute (-drop) and trace sampling by trace id
// (-sample.traces, the Collector-contrib probabilistic_sampler's decisions: its hash_seed mode,
// and OTEP 235 consistent sampling in its proportional and equalizing modes, which write the
// sampling threshold into each kept span's trace_state), log records by the same decision
// (-sample.logs).
//
// A request is a run of resource entries (ResourceSpans, ResourceMetrics, ResourceLogs), and
// fastpath hands them to Chain.AppendEntry one at a time (pipeline.Config.Processor): every
// intake's requests, gRPC, HTTP, UDS and Kafka, pass through it. Each step reads and rewrites
// protobuf bytes: a Resource's attributes are its field-1 KeyValues, so an edit drops the
// colliding ones, appends the new ones and rewrites the lengths of the Resource and of its
// entry; a drop leaves the entry out (a subset of the entries is a valid request); sampling
// leaves spans out of their ScopeSpans and rewrites the enclosing lengths, and in the
// consistent modes replaces a kept span's trace_state field. Spans are never decoded: sampling
// reads a span's trace id, its trace_state and its attribute keys (a log record's trace id),
// nothing else. What is dropped or sampled out is counted (otlpgate_process_*), by Commit, once
// fastpath admitted the request: a request refused for backpressure and sent again is
// counted once.
//
// Lengths are written before the bytes they measure, so each entry is planned first (new
// sizes, span decisions, the trace_states to write) and written second; the plan is kept in
// pooled buffers between the two passes. Nothing allocates per request once the pools are
// warm.
//
// Router reads a Resource's attributes with -drop's rules for a -dest's match=resource
// (route.go), and is the route splitter too (split.go), so that which entries go where has one
// home: the pipeline hands it a request (pipeline.Config.Router), and it groups the request's
// entries by the destinations that take them into pipeline.Pieces, which the pipeline
// enqueues; a spool feeder hands it a record, and it keeps the entries of the feeder's
// destination (Filter).
//
// It imports fastpath (the signals), fastpath/pipeline (the contracts it implements, Processor
// and Router, and the Tally the steps fill, whose slots signal.go names), pool/ and proto/ of
// otlpgate, nothing else; the pipeline does not import it. It starts no goroutines:
// AppendEntry runs on
// the goroutine of the intake that admits the request, and a Chain is safe for concurrent use
// once built.
package process
