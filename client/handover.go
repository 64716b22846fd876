package client

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/connectivity"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// Handover stops the destination like Shutdown, but gives its batches back instead of dropping
// them, so that a Fleet can send them to another backend: a backend that left the resolved set
// or was ejected.
//
// It refuses new batches at once and hands back every queued request (never sent, or waiting
// for a retry or re-send) in queue order. It then waits, while ctx allows, for the requests
// pending on the upstream to be answered: those acknowledged are delivered as usual. When ctx
// ends, it stops every goroutine and hands back what is still pending, oldest id first, and
// whatever came back to the queue meanwhile. take receives each batch with the destination's
// payload reference, which it now owns (it must enqueue or finish the batch); sent tells that
// the batch went out at least once, so the backend may have it (a possible duplicate).
//
// Call it once, instead of Shutdown. take may run on the destination's senders as well as on
// Handover's goroutine, until Handover returns. Safe for concurrent use with everything else.
func (d *Dest) Handover(ctx context.Context, take func(b *pipeline.Batch, sent bool)) error {
	d.q.mu.Lock()
	prev, ok := d.state.move(stateDraining, stateCreated, stateRunning)
	if !ok {
		d.q.mu.Unlock()
		return errors.New("client: Handover after Shutdown or Handover")
	}
	queued := d.takeQueueLocked(nil)
	d.q.mu.Unlock()
	for _, r := range queued {
		d.handBack(r, take)
	}
	if d.outstanding.Load() == 0 {
		d.drainOnce.Do(d.closeDrained)
	}
	if prev == stateRunning {
		select {
		case <-d.drained:
		case <-ctx.Done():
		}
	}
	d.handback.Store(&take)
	d.state.move(stateStopping, stateDraining)
	close(d.stop)
	d.cancel()
	if d.http != nil {
		d.http.abort() // as Shutdown: fasthttp calls take no context
	}
	if d.h2 != nil {
		d.h2.abort()
	}
	d.wg.Wait()
	if d.conn != nil { // nil for ProtocolHTTP
		d.conn.Close()
	}
	defer heldBytes.remove(d) // after the hand-backs below have settled d.held

	// Every goroutine is gone: what is left is in the ack table or the queue.
	left := d.acks.takeIf(func(*request) bool { return true }, nil)
	for range left {
		d.sending.Add(-1)
	}
	slices.SortFunc(left, func(a, b *request) int { return cmp.Compare(a.id, b.id) })
	d.q.mu.Lock()
	left = d.takeQueueLocked(left)
	d.q.mu.Unlock()
	for _, r := range left {
		d.handBack(r, take)
	}
	d.state.move(stateStopped, stateStopping)
	return nil
}

// enqueueFirst is Enqueue for a batch a Fleet routes again (its backend left or failed, or
// it waited in the fleet's hold): it queues b with the re-sends, ahead of every fresh batch, so
// that a key's older spans go out before its newer ones that reached this backend first. It
// is bounded by QueueBytes as Enqueue is. Safe for concurrent use.
func (d *Dest) enqueueFirst(b *pipeline.Batch) error { return d.enqueue(b, true) }

// takeQueueLocked appends every queued request to out: per signal, re-sends and retries first,
// then fresh batches, which is oldest first within a signal.
func (d *Dest) takeQueueLocked(out []*request) []*request {
	again, fresh := d.q.takeAllLocked(out, nil)
	return append(again, fresh...)
}

// handBack releases r's accounting and gives its batch to take, unfinished.
func (d *Dest) handBack(r *request, take func(*pipeline.Batch, bool)) {
	b, n, sent := r.b, r.size, r.attempt > 0
	putRequest(r)
	d.held.Add(-int64(n))
	d.m.handedOver.Inc()
	take(b, sent)
	if d.outstanding.Add(-1) == 0 && d.closing() {
		d.drainOnce.Do(d.closeDrained)
	}
}

// health reports what a Fleet's eject check reads: requests acknowledged so far and requests
// not yet finished. Safe for concurrent use.
func (d *Dest) health() (acked uint64, outstanding int64) {
	return d.acked.Load(), d.outstanding.Load()
}

// connected reports whether the connection is up, asking it to connect when it is idle: an
// ejected backend is probed this way before it is admitted again. Safe for concurrent use.
func (d *Dest) connected() bool {
	if d.h2 != nil {
		return d.h2.connected()
	}
	s := d.conn.GetState()
	if s == connectivity.Idle {
		d.conn.Connect()
	}
	return s == connectivity.Ready
}
