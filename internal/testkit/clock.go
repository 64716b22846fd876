package testkit

import (
	"sync"
	"time"
)

// Clock is a clock that stands still until the test advances it; timers made with At fire
// when it passes their deadline. It serves servers that run on real sockets (which a
// testing/synctest bubble does not allow) and take their time from a replaceable source:
// the UDS intake's exporter (Now, At) and the Kafka intake's throttle (Now).
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock that reads start until advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At returns a channel that receives the clock's time once it reaches t (at once if it already
// has), and a function that cancels the timer.
func (c *Clock) At(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch, func() {}
	}
	c.waiters = append(c.waiters, clockWaiter{at: t, ch: ch})
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, w := range c.waiters {
			if w.ch == ch {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
	}
}

// WaitingAt reports whether a timer waits for exactly t: a test advances the clock only once
// the code under test armed the timer it means to fire.
func (c *Clock) WaitingAt(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.at.Equal(t) {
			return true
		}
	}
	return false
}

// Advance moves the clock forward by d and fires the timers it passed.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}
