package client

import (
	"testing"
	"testing/synctest"
	"time"
)

// An OTEP stream destination's ack sweep sleeps while nothing is in flight and no stream is
// half-closed, wakes on the next send, ticks while the request waits for its answer, and goes
// back to sleep once it is answered; a half-closed stream keeps it awake too.
func TestSweepSleepsWhileNothingInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &Dest{cfg: Config{AckTimeout: 4 * time.Second}, acks: newAckTable(ackShardBits),
			stop: make(chan struct{}), sweepWake: make(chan struct{}, 1)}
		d.streams.set = map[*stream]struct{}{}
		d.wg.Add(1)
		go d.sweep()
		defer func() { close(d.stop); d.wg.Wait() }()
		tick := time.Second // AckTimeout/4

		passes := func(idle time.Duration) int64 {
			before := d.sweeps.Load()
			time.Sleep(idle)
			synctest.Wait()
			return d.sweeps.Load() - before
		}
		if n := passes(time.Hour); n > 1 {
			t.Fatalf("%d sweeps in an idle hour, want at most the first", n)
		}

		s := &stream{d: d}
		r := &request{id: 1, sentAt: notSent, stream: s}
		d.pending(r)
		if n := passes(5*tick + time.Millisecond); n != 5 {
			t.Fatalf("%d sweeps over 5 ticks with a request in flight, want 5", n)
		}
		if got := d.acks.remove(1, s); got != r {
			t.Fatalf("the request left the ack table without an answer: %v", got)
		}
		passes(tick) // the pass that finds the table empty
		if n := passes(time.Hour); n != 0 {
			t.Fatalf("%d sweeps in an hour after the answer, want none", n)
		}

		// A re-balanced stream, half-closed, waits for the server to end it: the sweep ends
		// it itself an ack timeout later unless that happens (pend keeps this one open).
		s.pend.Add(1)
		s.half.Store(nanotime())
		d.streams.mu.Lock()
		d.streams.set[s] = struct{}{}
		d.streams.mu.Unlock()
		d.wakeSweep()
		if n := passes(3*tick + time.Millisecond); n != 3 {
			t.Fatalf("%d sweeps over 3 ticks with a half-closed stream, want 3", n)
		}
		d.streams.mu.Lock()
		delete(d.streams.set, s)
		d.streams.mu.Unlock()
		passes(tick)
		if n := passes(time.Hour); n != 0 {
			t.Fatalf("%d sweeps in an hour after the stream ended, want none", n)
		}
	})
}
