package testkit

import (
	"sync"

	"github.com/otlpgate/otlpgate/fastpath"
)

// WireDest is a destination that sends compressed pass-through batches of Enc
// (fastpath.WireEncoder): it notes each batch's encoding and hands the batch to the Recorder.
type WireDest struct {
	*Recorder
	Enc  fastpath.Encoding
	mu   sync.Mutex
	encs []fastpath.Encoding
}

// PassThrough implements fastpath.WireEncoder.
func (d *WireDest) PassThrough() fastpath.Encoding { return d.Enc }

// Enqueue notes b's encoding and records b.
func (d *WireDest) Enqueue(b *fastpath.Batch) error {
	d.mu.Lock()
	d.encs = append(d.encs, b.Encoding)
	d.mu.Unlock()
	return d.Recorder.Enqueue(b)
}

// Encodings returns the encodings of the batches enqueued so far, in order.
func (d *WireDest) Encodings() []fastpath.Encoding {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]fastpath.Encoding(nil), d.encs...)
}
