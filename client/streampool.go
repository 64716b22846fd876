package client

import (
	"context"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// A destination re-opens its streams for re-balancing every RebalanceBytes (960 KiB by
// default), which at high rates is many times a second. The state of a stream and the
// goroutine that reads its answers are therefore recycled, and with the state its context,
// cancel function and open timer (a stream context, callctx.go): opening a stream costs
// gRPC's allocations, none of the destination's own, standard library calls included.
//
// A stream's refs count the lane while it is the lane's current stream, the receiver until it
// has settled everything pending at the end, and each request in the ack table on it. When the
// last of them lets go, nobody can reach the stream any more (the set the sweeper walks lost
// it at the end, the lane forgot it, no request names it), and it goes back to its
// destination's free list, window empty.
//
// Receivers are goroutines that outlive their stream: when one has finished a stream it waits
// for the next one to be opened, so a destination starts a receiver only when none is idle.

// maxFreeStreams bounds the free list and the idle receivers by the streams a destination can
// have alive at once: per signal, its lanes' current streams and the re-balanced ones still
// answering, each of which holds at least one of the signal's in-flight tokens (MaxInFlight,
// Streams*Window by default) until its last answer, or is about to end. A smaller bound drops
// streams whenever answers lag behind a few re-opens (a collection's pause is enough) and
// makes them again at the next re-opens, a cost per lag rather than per process. What the list
// holds is what was once alive at the same time, at most a few hundred bytes a stream.
func (d *Dest) maxFreeStreams() int {
	limit := d.cfg.MaxInFlight
	if limit == 0 {
		limit = d.cfg.Streams * d.cfg.Window
	}
	return (2*d.cfg.Streams + limit) * int(fastpath.NumSignals)
}

// getStream returns a recycled stream of d, or a new one. Its window is empty and its
// counters zero; the caller sets the rest.
func (d *Dest) getStream() *stream {
	d.streams.mu.Lock()
	if n := len(d.streams.free); n > 0 {
		s := d.streams.free[n-1]
		d.streams.free[n-1] = nil
		d.streams.free = d.streams.free[:n-1]
		d.streams.mu.Unlock()
		return s
	}
	d.streams.mu.Unlock()
	return d.newStream()
}

// newStream makes a stream of d with its context, cancel function and open timer.
func (d *Dest) newStream() *stream {
	s := &stream{d: d, slots: make(chan struct{}, d.cfg.Window)}
	if d.h2 != nil {
		s.h2 = newH2Bidi(d)
	}
	s.over = make(chan struct{}, 1)
	s.ctx, s.release = newStreamContext(d.ctx)
	s.cancel = func() {
		s.ctx.cancel(context.Canceled)
		select {
		case s.over <- struct{}{}:
		default: // the lane has yet to take the last one
		}
	}
	s.openWait = time.AfterFunc(time.Hour, s.cancel)
	s.openWait.Stop()
	return s
}

// unref gives back one reference to s; the last one recycles it.
func (s *stream) unref() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.d.putStream(s)
	case n < 0:
		panic("BUG: client: stream released more often than held")
	}
}

// putStream resets s and keeps it for the next openStream, unless the destination is stopping
// or keeps enough already.
func (d *Dest) putStream(s *stream) {
	if len(s.slots) != 0 {
		panic("BUG: client: stream recycled with requests in its window")
	}
	s.cs = nil
	s.ctx.end() // grpc-go let go of the stream's context when the stream ended
	s.opened, s.sent, s.bytes = 0, 0, 0
	s.pend.Store(0)
	s.acked.Store(false)
	s.broken.Store(false)
	s.half.Store(0)
	s.sendStart.Store(0)
	s.stalled.Store(0)
	s.lastAnswer.Store(0)
	s.silent.Store(false)
	if d.stopping() {
		s.release()
		return
	}
	d.streams.mu.Lock()
	kept := len(d.streams.free) < d.maxFreeStreams()
	if kept {
		d.streams.free = append(d.streams.free, s)
	}
	d.streams.mu.Unlock()
	if !kept {
		s.release()
	}
}

// prefillStreams is how many streams, each with an idle receiver, a streaming destination
// makes when it starts: 32 per lane of a signal (64 by default), what a lane's re-opens every
// 960 KiB keep alive when large batches' answers lag by a few tens of batches. Made later, at
// the first peak that needs them, they would cost their allocations in the middle of traffic.
// A backend of a balanced destination makes 8 per lane: it carries its share of the traffic,
// and a fleet of many backends would otherwise hold 64 idle goroutines and streams for each
// (about 512 KiB of stacks). Its free list still grows to maxFreeStreams at its first peaks.
func (d *Dest) prefillStreams() int {
	per := 32
	if d.cfg.fleetMember {
		per = 8
	}
	return min(d.maxFreeStreams(), per*d.cfg.Streams)
}

// prefill stocks the free list and the idle receivers with prefillStreams streams, and the
// frames' free list with a window's worth of frames per lane. Called by Start.
func (d *Dest) prefill() {
	n := d.prefillStreams()
	d.streams.mu.Lock()
	for len(d.streams.free) < n {
		d.streams.free = append(d.streams.free, d.newStream())
	}
	d.streams.mu.Unlock()
	for range n {
		d.idleReceivers.Add(1)
		d.wg.Add(1)
		go d.receiver(nil)
	}
	prefillFrames(d.cfg.Streams * d.cfg.Window)
}

// receive hands s to an idle receiver, or starts one.
func (d *Dest) receive(s *stream) {
	select {
	case d.recvq <- s:
	default:
		d.wg.Add(1)
		go d.receiver(s)
	}
}

// receiver reads the answers of s, then of each stream it is handed next, until the
// destination stops or enough receivers are idle already. A receiver started idle (prefill)
// has a nil s and was counted idle by its starter.
func (d *Dest) receiver(s *stream) {
	defer d.wg.Done()
	var resp otepv1.ExportResponse // reused: RecvMsg resets it
	for {
		if s != nil {
			s.recv(&resp)
			s.unref()
			if d.idleReceivers.Add(1) > int32(d.maxFreeStreams()) {
				d.idleReceivers.Add(-1)
				return
			}
		}
		select {
		case s = <-d.recvq:
			d.idleReceivers.Add(-1)
		case <-d.stop:
			d.idleReceivers.Add(-1)
			return
		}
	}
}
