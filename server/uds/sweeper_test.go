package uds

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// With no connection the timeout sweep sleeps instead of ticking, so an idle intake wakes
// nobody. The first connection after the silence is stamped with the real time, not with the
// clock as the sweep left it (which would make it as old as the silence and close it as idle at
// once), wakes the sweep, and is still closed when it goes quiet past the idle timeout; then
// the sweep sleeps again.
func TestSweepSleepsWithoutConnections(t *testing.T) {
	idleBefore := counter(idleTimeouts)
	h := start(t, func(c *Config) { c.IdleTimeout = 2 * time.Second })
	testkit.WaitFor(t, "the sweep to sleep without connections", h.s.sweepAsleep.Load)
	stale := h.s.clk.now()
	before := int64(time.Since(h.s.clk.epoch)) + 1
	if before <= stale {
		// The clock cannot be both current and stopped; wait until real time is past it.
		testkit.WaitFor(t, "real time past the stopped clock", func() bool {
			before = int64(time.Since(h.s.clk.epoch)) + 1
			return before > stale
		})
	}
	quiet := h.dial()
	defer quiet.Close()
	var stamp int64
	testkit.WaitFor(t, "the connection watched", func() bool {
		h.s.watch.mu.Lock()
		defer h.s.watch.mu.Unlock()
		if len(h.s.watch.mu.conns) != 1 {
			return false
		}
		stamp = h.s.watch.mu.conns[0].lastRead.Load()
		return true
	})
	if stamp < before {
		t.Fatalf("the connection opened after the sweep slept is stamped %v before it dialled (the clock stopped at %v)",
			time.Duration(before-stamp), time.Duration(before-stale))
	}
	quiet.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := quiet.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("quiet connection: read %d, %v; want EOF from the server closing it", n, err)
	}
	if d := counter(idleTimeouts) - idleBefore; d != 1 {
		t.Errorf("idle timeouts %v, want 1", d)
	}
	testkit.WaitFor(t, "the sweep to sleep again", h.s.sweepAsleep.Load)
}
