package pipeline

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath"
)

// ErrFull is returned by Consume when the payload cannot be admitted now: the queue is at its
// byte limit. The caller answers with backpressure (FailedRetryable, UNAVAILABLE, a throttle) and
// counts it; it must not retry in a loop.
var ErrFull = errors.New("fastpath: queue full")

// ErrTooLarge is returned by Consume when a single payload exceeds the admission limit and can
// never be admitted.
var ErrTooLarge = errors.New("fastpath: payload exceeds queue size")

// Consumer takes telemetry into the data path. Intakes that have no end-to-end acknowledgement
// (the UDS and Kafka intakes) hand their output to a Consumer.
type Consumer interface {
	// Consume admits req.Body, the encoded body of a v1 Export{Trace,Metrics,Logs}ServiceRequest
	// (a run of field-1 resource entries) of signal req.Signal, carrying req.Items spans, data
	// points or log records, from req.Origin: these intakes read no headers, so its tenant is
	// the default one, and its client address is the connection's where it has one (Kafka's
	// TCP connections), which the processing steps may write into its resources
	// (-resource.from-peer). Layout, Wire, Encoding and Own are not read. req.Body is only read
	// during the call: Consume copies what it keeps, so the caller may reuse it at once. It
	// returns ErrFull or ErrTooLarge when the payload is not admitted. Safe for concurrent use.
	Consume(req Request) error
}

// Serving is implemented by a Consumer that can say ahead of a request whether a signal has a
// destination now (-dest signals=), for the default tenant. Safe for concurrent use.
type Serving interface {
	Serves(sig fastpath.Signal) bool
}
