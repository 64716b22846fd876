package testkit

import (
	"sync/atomic"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// Discard is a pipeline.Destination and a pipeline.Consumer that keeps nothing: it finishes
// every batch at once as delivered and accepts every request, counting items. It allocates
// nothing, so allocation tests and benchmarks measure only the code in front of it. The zero
// value is ready to use.
type Discard struct {
	items atomic.Int64
}

var (
	_ pipeline.Destination = (*Discard)(nil)
	_ pipeline.Consumer    = (*Discard)(nil)
)

// Name implements pipeline.Destination.
func (*Discard) Name() string { return "discard" }

// Enqueue implements pipeline.Destination.
func (d *Discard) Enqueue(b *pipeline.Batch) error {
	d.items.Add(int64(b.Items))
	b.Done(true)
	return nil
}

// Consume implements pipeline.Consumer.
func (d *Discard) Consume(req pipeline.Request) error {
	d.items.Add(int64(req.Items))
	return nil
}

// Items returns how many items went through.
func (d *Discard) Items() int64 { return d.items.Load() }
