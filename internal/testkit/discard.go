package testkit

import (
	"sync/atomic"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Discard is a fastpath.Destination and a fastpath.Consumer that keeps nothing: it finishes
// every batch at once as delivered and accepts every request, counting items. It allocates
// nothing, so allocation tests and benchmarks measure only the code in front of it. The zero
// value is ready to use.
type Discard struct {
	items atomic.Int64
}

var (
	_ fastpath.Destination = (*Discard)(nil)
	_ fastpath.Consumer    = (*Discard)(nil)
)

// Name implements fastpath.Destination.
func (*Discard) Name() string { return "discard" }

// Enqueue implements fastpath.Destination.
func (d *Discard) Enqueue(b *fastpath.Batch) error {
	d.items.Add(int64(b.Items))
	b.Done(true)
	return nil
}

// Consume implements fastpath.Consumer.
func (d *Discard) Consume(_ fastpath.Signal, _ []byte, items int) error {
	d.items.Add(int64(items))
	return nil
}

// Items returns how many items went through.
func (d *Discard) Items() int64 { return d.items.Load() }
