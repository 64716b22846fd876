package pipeline

import (
	"sync"
	"sync/atomic"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// Splitter splits a sealed batch into batches of one destination each, for a balanced
// destination (client's Fleet): fastpath.Splitter partitions the bytes, and each part becomes a
// batch whose end finishes the batch it came from once every part has ended. A Splitter keeps
// scratch space across calls and allocates nothing once that space fits the batches it sees.
// It is not safe for concurrent use: pool it (GetSplitter, PutSplitter).
type Splitter struct {
	w    *fastpath.Splitter
	kids []*Batch
}

var splitters = sync.Pool{New: func() any { return new(Splitter) }}

// GetSplitter returns a Splitter from the pool. Safe for concurrent use.
func GetSplitter() *Splitter {
	s := splitters.Get().(*Splitter)
	s.w = fastpath.GetSplitter()
	return s
}

// PutSplitter returns s to the pool; the parts of its last Split must have been taken.
func PutSplitter(s *Splitter) {
	fastpath.PutSplitter(s.w)
	s.w = nil
	clear(s.kids)
	splitters.Put(s)
}

// Split partitions the payload of b into n parts by key, asking pick for the owner of each key.
//
// When every item goes to one part it returns that part's index and nil: b goes on as it is,
// by reference. Otherwise it returns -1 and a slice of n batches, nil where a part got
// nothing; each holds its own pooled payload and one pending destination, and b is finished
// (b.Done's work) once every part was finished, delivered only if every part was. The caller
// must then hand each part to one destination and must not call b.Done itself; b's payload
// reference is released before Split returns. The slice is valid until the next call.
//
// A payload that does not parse goes whole to the owner of the empty key, with the error:
// it is still delivered, and the caller counts it.
func (s *Splitter) Split(b *Batch, key fastpath.SplitKey, n int, pick fastpath.Picker) (int, []*Batch, error) {
	whole, err := s.w.Partition(b.Signal, b.Payload.Bytes(), key, n, pick)
	if err != nil {
		return pick.Pick(fastpath.HashKey(nil)), nil, err
	}
	if whole >= 0 {
		return whole, nil, nil
	}
	j := joins.Get().(*join)
	j.parent = b
	s.kids = s.kids[:0]
	live := int32(0)
	for i := range n {
		var k *Batch
		if p, items := s.w.TakePart(i); p != nil {
			k = newPart(b.Signal, p, items, j)
			k.Tenant = b.Tenant
			live++
		}
		s.kids = append(s.kids, k)
	}
	j.left.Store(live)
	b.Payload.Release() // every part holds its own copy
	return -1, s.kids, nil
}

// join finishes a split batch once each of its parts is finished.
type join struct {
	parent *Batch
	left   atomic.Int32
	failed atomic.Bool
	// other is set by a part given up for another reason than its upstream's refusal: the
	// split batch is rejected (Reject) only when every part that failed was.
	other atomic.Bool
}

var joins = sync.Pool{New: func() any { return new(join) }}

// batchEnded ends k, a part of j's split batch. It implements ender.
func (j *join) batchEnded(k *Batch, delivered, rejected bool) {
	k.unref()
	j.partDone(delivered, rejected)
}

func (j *join) partDone(delivered, rejected bool) {
	if !delivered {
		j.failed.Store(true)
		if !rejected {
			j.other.Store(true)
		}
	}
	if j.left.Add(-1) != 0 {
		return
	}
	p := j.parent
	if j.failed.Load() {
		p.failures.Add(1)
		if !j.other.Load() {
			p.rejects.Add(1)
		}
	}
	j.parent = nil
	j.failed.Store(false)
	j.other.Store(false)
	joins.Put(j)
	p.finishOne() // its payload was released by Split
}

// newPart is a batch of one destination holding part of a split batch.
func newPart(sig fastpath.Signal, p *pool.Payload, items int, j *join) *Batch {
	k := batchPool.Get()
	k.Signal, k.Items, k.Payload = sig, items, p
	k.size = p.Len()
	k.join, k.end = j, j
	k.pending.Store(1)
	k.refs.Store(1)
	return k
}
