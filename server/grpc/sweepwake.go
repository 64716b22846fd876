package grpcserver

import "time"

// sweepWake lets a sweep over a set of connections sleep while the set is empty instead of
// ticking, so that an intake nobody is connected to wakes no thread. The set signals every
// connection it adds (a send that never blocks, on a channel of one); the sweep looks at the
// set under the set's lock and sleeps only when it found it empty, so a connection added after
// that look has left its signal in the channel. A signal left while the sweep was awake costs
// one extra pass later.
type sweepWake chan struct{}

func newSweepWake() sweepWake { return make(chan struct{}, 1) }

// signal tells a sleeping sweep that the set is no longer empty. Safe for concurrent use.
func (w sweepWake) signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// sleep stops t until a signal comes, then resets it to period and returns true; it returns
// false when stop closes first. Sweep goroutine only.
func (w sweepWake) sleep(t *time.Ticker, period time.Duration, stop <-chan struct{}) bool {
	t.Stop()
	select {
	case <-stop:
		return false
	case <-w:
		t.Reset(period)
		return true
	}
}
