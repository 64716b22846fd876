package pipeline

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath"
)

// OriginConsumer is a Consumer that also takes where what it consumes came from: the Kafka
// intake's pushes arrive on TCP connections, whose client address the processing steps may
// write into their resources (-resource.from-peer). Pipeline and the spool's admission
// implement it.
type OriginConsumer interface {
	Consumer
	// ConsumeFrom is Consume for data from o. Safe for concurrent use.
	ConsumeFrom(o Origin, sig fastpath.Signal, body []byte, items int) error
}

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
	// Consume admits body, the encoded body of a v1 Export{Trace,Metrics,Logs}ServiceRequest
	// (a run of field-1 resource entries), carrying items spans, data points or log records.
	// body is only read during the call: Consume copies what it keeps, so the caller may reuse
	// it at once. It returns ErrFull or ErrTooLarge when the payload is not admitted.
	// Safe for concurrent use.
	Consume(sig fastpath.Signal, body []byte, items int) error
}

// Serving is implemented by a Consumer that can say ahead of a request whether a signal has a
// destination now (-dest signals=), for the default tenant. Safe for concurrent use.
type Serving interface {
	Serves(sig fastpath.Signal) bool
}
