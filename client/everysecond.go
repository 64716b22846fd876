package client

import (
	"sync/atomic"
	"time"
)

// everySecond lets one event through per second: the log lines of what an upstream may do on
// every request (refuse it, answer what cannot be read, report a partial success) then cost
// one line a second, not one a request, and the counters keep the totals. Every such line of
// the package goes through one, so that they all keep the same rule: the first event at
// once, then at most one a second, never two racing callers in the same second. The zero
// value is ready. Safe for concurrent use.
type everySecond struct{ last atomic.Int64 } // nanotime of the latest event let through, 0 before the first

// allow reports whether an event now may be logged; at most one caller a second gets true.
func (e *everySecond) allow() bool { return e.allowAt(nanotime()) }

// allowAt is allow at the time now (nanotime, never 0): the clock is the caller's, so that
// tests can set it.
func (e *everySecond) allowAt(now int64) bool {
	last := e.last.Load()
	if last != 0 && now-last < int64(time.Second) {
		return false
	}
	// Of two callers that read the same last, one wins; the other's event is within the
	// same second and is left out.
	return e.last.CompareAndSwap(last, now)
}
