package testkit

import (
	"testing"
	"time"
)

// WaitTimeout bounds WaitFor. It only stops a broken test from hanging: a condition that holds
// returns at once, so it is set for a busy 2-core machine, not for speed.
const WaitTimeout = 60 * time.Second

// WaitFor polls cond until it holds and fails the test, naming what it waited for, if it does
// not within WaitTimeout. what completes "waiting for ...": "every close to be handled".
// Inside a testing/synctest bubble the polling sleeps on the bubble's clock.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	// Short naps first, so that a condition about to hold costs little; longer ones after, so
	// that a long wait does not take a core from the code it waits for.
	nap := 100 * time.Microsecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
		}
		time.Sleep(nap)
		nap = min(2*nap, 10*time.Millisecond)
	}
}
