// Package client owns upstream delivery: one Dest per -dest, each with its own byte-bounded
// queue, request ids, ack table, retry and throttle state, speaking otlpgate.otep.v1
// (UnaryExporter, StreamExporter) or the standard OTLP/gRPC v1 Export services.
//
// # Modes
//
// Stream mode (OTEP only) keeps Streams lanes per signal; each lane holds one stream and
// sends on it while fewer than Window of its requests wait for an answer. Answers carry the
// request id and may come in any order; the ack table (acktable.go) matches them. Unary mode
// runs Concurrency workers per signal with one call in flight each, the call's answer or error
// coming before the next call. Every signal has its own queue and senders, so a signal whose
// upstream stops answering never holds up another's sends (a throttle still pauses the whole
// destination: it speaks for the server). The signals share QueueBytes.
//
// # What happens to a request
//
// Ids are sequential per destination, given in Enqueue order, and kept across attempts, so
// that an upstream can recognise a re-send. The OTEP result codes decide: Success finishes the
// batch with Done(true); FailedNoneRetryable drops it (counted); FailedRetryable sends it again
// after an exponential backoff with jitter (RetryInitial, RetryMax) unless that lands past
// RetryMaxElapsed. v1 calls and stream ends map gRPC codes the same way (retry.go).
// UNAVAILABLE or RESOURCE_EXHAUSTED with RetryInfo pauses the whole destination for at least
// the retry delay, doubling while throttles follow each other; other destinations are not
// affected. When a stream breaks, its unanswered requests are sent again at once on a new
// stream (RetryOnReconnect); the upstream may have received them, so they are counted as
// possible duplicates, and nothing is lost. A request not answered within AckTimeout is sent
// again the same way: an upstream that takes requests and never answers must not turn
// acknowledged data into a loss. When nothing at all came back on its stream since it went out,
// the stream is given up and everything pending on it goes again on a new one; while the stream
// answers others, the late request alone goes again. In unary mode the timed-out call is
// cancelled and retried after the backoff. Either way RetryMaxElapsed still bounds it (cmd runs
// destinations fed from a spool without that budget). The ack clock starts when the transport
// took the request (SendMsg returned); in stream mode the time the stream spends blocked in
// SendMsg afterwards, on flow control, is left out too, because requests already handed over
// wait behind the same closed window (Dest.overdue). A connection that is dead altogether is
// found by the keepalive pings. A lane whose streams keep breaking before any answer
// backs off before opening the next one; otherwise a stream re-opens as soon as the connection
// allows, and a re-balance never waits (not even one before the stream's first answer, the
// first stream after an outage taking a backlog). A stream that ends with INTERNAL may have been ended by the one request on it that
// the upstream cannot decode: its pending requests are sent again one at a time, and one that
// keeps ending the streams it is alone on is dropped after PoisonAfter of them (poison.go).
//
// A request's life, from Enqueue to Done (request.go says who owns it in each state):
//
//	Enqueue --> queued --> sent --> pending --+-- Success -------------------------> acked    Done(true)
//	  |          ^  ^                         +-- FailedNoneRetryable,
//	  |          |  |                         |   too large, unframeable ---------> dropped  Done(false)
//	  |          |  +-- retry (backoff) <-----+-- FailedRetryable, retryable code, RetryInfo,
//	  |          |        |                   |   AckTimeout (unary, http)
//	  |          |        +-- past RetryMaxElapsed -----------------------------> dropped  Done(false)
//	  |          +------- resend (at once) <--+-- its stream broke, AckTimeout (stream)
//	  |                   +-- past RetryMaxElapsed, RetryOnReconnect off -------> dropped  Done(false)
//	  |                   +-- alone on PoisonAfter streams ended with INTERNAL --> dropped  Done(false)
//	  +-- queue full, or Shutdown began: refused (the pipeline counts it)
//
// Shutdown, once it stops waiting, drops what is queued, pending or waiting for a retry, each
// under its own reason. Every path ends in exactly one Done.
//
// Re-balancing: after RebalanceTimeout or RebalanceRequests a lane half-closes its stream,
// opens a new one for the next requests, and the old stream's receiver keeps reading answers
// until the server closes it. Pending requests stay bound to the stream they went out on, so
// the switch neither loses nor repeats any.
//
// Shutdown refuses new batches, waits while its context allows for every request to be
// answered (WaitOnShutdown), then stops, and finishes the rest with Done(false), counted by
// reason (queued, pending, waiting for a retry). A destination's life is one state moved by
// documented steps (lifecycle.go: created, running, draining, stopping, stopped); the reasons
// a request is dropped or retried are typed (reasons.go), their strings the metric labels.
// Each destination keeps its latest failure, redacted, for the status page (lasterror.go).
//
// # Payloads are shared, never copied per destination
//
// A v1 request is the payload itself, sent as a codec.Raw holding a reference that gRPC's
// transport releases once written. An OTEP request differs from the payload by its id and by
// one tag byte per resource entry (0x12 instead of 0x0a); frame.go sends it as a
// mem.BufferSlice of small header buffers interleaved with views of the payload, so the body is
// not copied either. Payloads whose entries average under 1 KiB, or that are too small for gRPC
// to track by reference (1 KiB), are copied once per attempt into a pooled buffer instead: for
// them a copy is cheaper than the views (frame_bench_test.go).
//
// # OTLP/HTTP
//
// Protocol "http" runs Concurrency workers like unary mode, each POSTing one request at a time
// through a shared fasthttp client (http.go); the answer's status maps onto the same deliver,
// drop, retry and throttle as a gRPC status (429, 502, 503, 504 and transport errors retry,
// Retry-After throttles, anything else rejects). The body is the payload's own bytes, or a
// pooled compressed copy.
//
// # The own gRPC client
//
// Transport "otlpgate" (v1 and OTEP, unary and streams) replaces grpc-go's ClientConn with one
// HTTP/2 connection per destination built on internal/h2 (h2conn.go: the reader, windows,
// SETTINGS, PING, GOAWAY; h2call.go: streams, HEADERS frames per signal and tenant, DATA by
// writev from the batch's bytes; h2worker.go: the unary workers; h2stream.go: OTEP requests as
// views of the batch, and the OTEP streams that stand where grpc-go's ClientStream does under
// the lanes and receivers). A call's result goes through the same unaryAnswered, unaryFailed
// and result as a grpc-go call, from the same statuses; a stream's end through the same
// stream.end.
//
// # Tenants
//
// A batch carries its tenant (-intake.headers). forward-headers sends the tenant's values with
// each batch: a unary call's metadata from a context made once per tenant, an OTLP/HTTP
// request's headers rewritten in place (forward.go); stream mode cannot, since a stream's
// metadata is sent once and it carries every tenant's batches. A FailedRetryable answer's
// retry_delay_ms (an upstream otlpgate's -tenant.rate) delays that request alone.
//
// # Goroutines and rules
//
// Enqueue runs on the pipeline's goroutines and never blocks. Start launches the senders
// (lanes or workers), one receiver per open stream and, in stream mode, one sweeper for ack
// timeouts; all of them have returned when Shutdown returns. Each request is owned by one
// place at a time (request.go); the ack table decides races between a receiver, the sweeper
// and a failing sender.
//
// It imports fastpath/ (fastpath/process for the rule of a -dest's match=, which Config
// carries for the gateway's router), codec/, pool/, proto/, internal/credfile (token files),
// internal/statusmetrics (the metrics the status page reads) and internal/h2 (the wire of its own HTTP/2 client, transport=otlpgate); never
// server/, cmd/ or bench/ (its tests use server/grpc and server/http as real upstreams).
package client
