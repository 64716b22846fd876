package pipeline

import (
	"errors"
)

// ErrClosed is returned by a destination's Enqueue after it began shutting down, and by the
// pipeline after Close.
var ErrClosed = errors.New("fastpath: closed")

// Destination is one place sealed batches go to: an upstream server (client/) or the local file.
type Destination interface {
	// Name identifies the destination in metrics and logs.
	Name() string
	// Enqueue offers a sealed batch. On a nil error the destination owns one reference to
	// b.Payload, taken for it by the pipeline, and must call b.Done exactly once when the batch
	// is acknowledged upstream or given up; Done releases that reference. On an error (its
	// queue is full: ErrFull; it is shutting down: ErrClosed) it keeps nothing and the pipeline
	// counts the batch as dropped for this destination. Enqueue must not block on the network.
	// Safe for concurrent use.
	Enqueue(b *Batch) error
}
