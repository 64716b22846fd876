package client

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The limiter of the package's log lines: the first event at once, then one a second, counted
// from the last event let through, not from the last one asked about.
func TestEverySecond(t *testing.T) {
	var e everySecond
	f := func(at time.Duration, want bool) {
		t.Helper()
		if got := e.allowAt(int64(at)); got != want {
			t.Errorf("allowAt(%v) = %v, want %v", at, got, want)
		}
	}
	f(5*time.Second, true) // the first, whenever it comes
	f(5*time.Second, false)
	f(5*time.Second+999*time.Millisecond, false)
	f(6*time.Second, true) // a second after the last let through
	f(6*time.Second+time.Nanosecond, false)
	f(6*time.Second+500*time.Millisecond, false) // refused: does not move the second on
	f(7*time.Second, true)
	f(60*time.Second, true) // after a quiet spell, at once
	f(60*time.Second+time.Millisecond, false)

	// Callers racing at the same instant: one line, not one per caller.
	var fresh everySecond
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if fresh.allowAt(int64(time.Second)) {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 1 {
		t.Errorf("%d of 16 callers at the same instant allowed, want 1", n)
	}
}
