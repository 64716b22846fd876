package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
)

// Batch is a sealed run of requests of one signal: the concatenated bodies of v1 export requests
// in one Payload, shared by every destination.
//
// Invariants:
//  1. Payload is immutable once the batch is sealed; each destination holds one reference until
//     it calls Done.
//  2. pending counts destinations that have not called Done; when it reaches zero the batch's
//     bytes leave the admission budget and upstream waiters are woken, exactly once.
//  3. refs counts holders of the Batch struct itself (the fan-out, waiters); the struct returns
//     to its pool when refs reaches zero, never before pending does.
type Batch struct {
	// Signal of every request in the batch.
	Signal fastpath.Signal
	// Items is the number of spans, data points or log records.
	Items int
	// Payload holds the v1 export request body. Valid until Done.
	Payload *pool.Payload
	// Tenant is the tenant of every request in the batch (-intake.headers), nil without
	// tenants. Set before the batch is sealed; a destination reads it for its forward-headers.
	Tenant *tenant.Tenant
	// Encoding is how Payload is compressed: EncodingNone for a plain v1 body, else the
	// concatenated compressed requests of a pass-through batch (passthrough.go), which only
	// destinations that send that encoding take.
	Encoding Encoding

	p        *Pipeline
	plain    int   // decompressed size of a pass-through batch's requests (PlainLen)
	size     int   // payload length, fixed at seal: the payload may be gone when the budget is settled
	born     int64 // nanotime of the first request, for BatchMaxAge
	pending  atomic.Int32
	failures atomic.Int32
	rejects  atomic.Int32 // of failures, those whose upstream refused the batch for good (Reject)
	refs     atomic.Int32
	finished chan struct{} // AckUpstream, or a request that waits (AdmitDelivered): closed once pending reaches zero
	set      *destSet      // the destinations it goes to (a pipeline's batch), fixed when it opens
	route    uint64        // with Config.Router: the destinations of set that take it (route.go)
	join     *join         // a part of a split batch: finishes the split batch, p is nil
	owner    BatchOwner    // NewBatch: told when the batch is finished, p is nil
	// end is what the batch's end is handed to, once every destination finished it: its
	// pipeline, the split batch it is a part of, or the owner NewBatch was given.
	end ender
}

// ender ends a batch once every destination it was handed to finished it: delivered when each
// delivered it, rejected when each that did not was refused for good. It takes over the
// batch's reference (unref); the batch may be reused once it returns.
type ender interface {
	batchEnded(b *Batch, delivered, rejected bool)
}

// handedOwner ends a batch built by NewBatch: it tells the batch's BatchOwner.
type handedOwner struct{}

func (handedOwner) batchEnded(b *Batch, delivered, rejected bool) {
	o := b.owner // read before unref: the batch may be reused after it
	b.unref()
	if ro, ok := o.(RejectOwner); ok && rejected {
		ro.BatchRejected()
		return
	}
	o.BatchDone(delivered)
}

// BatchOwner is told when the destination a batch built by NewBatch was handed to is finished
// with it. BatchDone runs on whichever goroutine called Done and must not block.
type BatchOwner interface {
	BatchDone(delivered bool)
}

// RejectOwner is a BatchOwner that tells a batch its upstream refused for good (Reject) from
// one given up for another reason: it is told BatchRejected instead of BatchDone(false). The
// spool counts such records as rejected, the upstream's doing, rather than undeliverable.
type RejectOwner interface {
	BatchOwner
	BatchRejected()
}

// KeepOwner is a BatchOwner that may keep the records of a batch given up undelivered, to be
// sent again by someone else: the spool's feeder, once stopped, leaves them unfinished on disk
// for the destination's replacement or the next start. A destination that stops asks (Kept),
// so that it does not count as dropped what is not lost.
type KeepOwner interface {
	BatchOwner
	// Keeps reports whether a batch finished undelivered now stays unfinished with the owner.
	// Safe for concurrent use; it must not block.
	Keeps() bool
}

// NewBatch returns a sealed batch of sig holding payload (the caller's reference, handed to
// the batch) with items items, for one destination, outside any pipeline: the spool's feeder
// builds batches from spooled records this way (and sets Tenant). Whoever holds the batch calls Done exactly
// once: the destination, after a nil Enqueue, or the caller, when it gives the batch up
// without handing it over. Done releases the payload, then tells owner.
func NewBatch(sig fastpath.Signal, items int, payload *pool.Payload, owner BatchOwner) *Batch {
	b := newOwnedBatch(sig, items, payload, owner)
	countSealed(b)
	return b
}

// NewWireBatch is NewBatch for a pass-through batch: payload holds concatenated requests
// compressed in enc (a zstd batch begins with ZstdPreamble), which inflate to plain bytes.
// Both count the batch in otlpgate_fastpath_passthrough_batches_total, by its way.
func NewWireBatch(sig fastpath.Signal, items int, enc Encoding, plain int, payload *pool.Payload, owner BatchOwner) *Batch {
	b := newOwnedBatch(sig, items, payload, owner)
	b.Encoding, b.plain = enc, plain
	countSealed(b)
	return b
}

func newOwnedBatch(sig fastpath.Signal, items int, payload *pool.Payload, owner BatchOwner) *Batch {
	b := batchPool.Get()
	b.Signal, b.Items, b.Payload = sig, items, payload
	b.size = payload.Len()
	b.owner, b.end = owner, handedOwner{}
	b.pending.Store(1)
	b.refs.Store(1)
	return b
}

// batchPool recycles batches through a free list that collections do not empty (a sync.Pool
// makes them again after each one). A batch lives until every destination is finished with it,
// so the list holds the batches of full queues; beyond it they are dropped for the collector.
var batchPool = pool.NewFreeList[Batch](maxFreeBatches, nil)

const maxFreeBatches = 4096

func getBatch(p *Pipeline, sig fastpath.Signal, size int) *Batch {
	b := batchPool.Get()
	b.Signal = sig
	b.p, b.end = p, p
	b.Payload = pool.NewPayload(size)
	b.refs.Store(1)
	if p.cfg.Ack == AckUpstream {
		b.finished = make(chan struct{})
	}
	return b
}

func (b *Batch) unref() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		*b = Batch{} // atomics are zero too; nothing else holds b
		batchPool.Put(b)
	case n < 0:
		panic("BUG: fastpath: batch released too often")
	}
}

// Len is the size of the batch's payload in bytes.
func (b *Batch) Len() int { return b.size }

// PlainLen is the size of the batch's requests decompressed: Len for a plain batch, the sum
// of the decompressed requests for a pass-through one. An upstream checks its message size
// limit against it (the Collector compares the decompressed body with its max receive size).
func (b *Batch) PlainLen() int {
	if b.Encoding == EncodingNone {
		return b.size
	}
	return b.plain
}

// Done reports that one destination is finished with the batch: delivered is true when its
// upstream acknowledged it, false when it was dropped (rejected, timed out, shut down). It
// releases the destination's payload reference; the destination must not touch b afterwards.
// Safe for concurrent use; exactly once per destination the batch was enqueued to.
func (b *Batch) Done(delivered bool) {
	if !delivered {
		b.failures.Add(1)
	}
	b.Payload.Release()
	b.finishOne()
}

// Reject is Done(false) for a batch the destination's upstream refused for good (a
// FailedNoneRetryable answer, a status that sending again cannot fix): the owner of a batch
// built by NewBatch is told so (RejectOwner). Safe for concurrent use; instead of Done.
func (b *Batch) Reject() {
	b.rejects.Add(1)
	b.Done(false)
}

func (b *Batch) finishOne() {
	switch n := b.pending.Add(-1); {
	case n == 0:
		failures := b.failures.Load()
		delivered := failures == 0
		rejected := !delivered && b.rejects.Load() == failures
		b.end.batchEnded(b, delivered, rejected)
	case n < 0:
		panic("BUG: fastpath: batch Done called more often than it was enqueued")
	}
}

// Kept reports whether b, given up undelivered now, is kept by its owner to be sent again
// (KeepOwner): a batch of the spool's feeder once the feeder stopped, or a part of one split
// by a balanced destination. A pipeline's batch is not: its bytes live only in memory. Call it
// before Done, while the destination still holds b. Safe for concurrent use.
func (b *Batch) Kept() bool {
	if j := b.join; j != nil {
		return j.parent.Kept()
	}
	ko, ok := b.owner.(KeepOwner)
	return ok && ko.Keeps()
}

// Wait blocks until every destination finished the batch (AckUpstream) or ctx ends, and reports
// whether every destination delivered it. The caller must call Unref afterwards. Safe for
// concurrent use; only for batches returned by Pipeline.Admit in AckUpstream mode.
func (b *Batch) Wait(ctx context.Context) (delivered bool, err error) {
	select {
	case <-b.finished:
		return b.failures.Load() == 0, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Outcome reports, without blocking, whether every destination finished the batch (done), and
// then whether every one delivered it (delivered) or each that did not was refused for good by
// its upstream (rejected: sending it again cannot help). Safe for concurrent use; only for
// batches returned by Pipeline.Admit in AckUpstream mode or by Pipeline.AdmitDelivered, before
// Unref.
func (b *Batch) Outcome() (done, delivered, rejected bool) {
	select {
	case <-b.finished:
		f := b.failures.Load()
		return true, f == 0, f > 0 && b.rejects.Load() == f
	default:
		return false, false, false
	}
}

// waitedLocked takes a reference for a caller that waits for the batch's end, and makes the
// channel that end closes when the pipeline's mode did not (AckAccept). Called with the
// signal's lock held while b is open: whoever seals b takes it out of the open set under that
// lock, so the channel is there before any destination can finish b.
func (b *Batch) waitedLocked() {
	if b.finished == nil {
		b.finished = make(chan struct{})
	}
	b.refs.Add(1)
}

// Unref drops the reference Pipeline.Admit returned the batch with.
func (b *Batch) Unref() { b.unref() }
