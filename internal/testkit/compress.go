package testkit

import (
	"sync"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// WireDest is a destination that sends compressed pass-through batches of Enc
// (pipeline.WireEncoder): it notes each batch's encoding and hands the batch to the Recorder.
type WireDest struct {
	*Recorder
	Enc  pipeline.Encoding
	mu   sync.Mutex
	encs []pipeline.Encoding
}

// PassThrough implements pipeline.WireEncoder.
func (d *WireDest) PassThrough() pipeline.Encoding { return d.Enc }

// Enqueue notes b's encoding and records b.
func (d *WireDest) Enqueue(b *pipeline.Batch) error {
	d.mu.Lock()
	d.encs = append(d.encs, b.Encoding)
	d.mu.Unlock()
	return d.Recorder.Enqueue(b)
}

// Encodings returns the encodings of the batches enqueued so far, in order.
func (d *WireDest) Encodings() []pipeline.Encoding {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]pipeline.Encoding(nil), d.encs...)
}
