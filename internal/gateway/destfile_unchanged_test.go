package gateway

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
)

// With two destinations, the second is removed and added again while the first holds calls
// in flight that its upstream took but has not answered. The first keeps running through both
// reloads: its default queue-bytes, half of -queue.max-bytes beside another destination and
// all of it alone, follows in place; it is never replaced, so it never sends again what it has
// in flight, and every span reaches its upstream exactly once. With a spool too, where a
// replacement would read again what the first had not finished.
func TestDestFileReloadKeepsUnchanged(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "dests")
		cfg := testConfig()
		cfg.DestFile, cfg.DestFilePoll = path, 0
		cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
		testReloadKeepsUnchanged(t, path, cfg)
	})
	t.Run("spool", func(t *testing.T) {
		path, cfg := spoolDestFileConfig(t)
		testReloadKeepsUnchanged(t, path, cfg)
	})
}

func testReloadKeepsUnchanged(t *testing.T, path string, cfg Config) {
	a, b := startUpstream(t), startUpstream(t)
	a.answerLate = true
	// A destination a reload replaced would give up waiting for its calls in flight after this,
	// and hand them to its replacement, which sends them again.
	cfg.ShutdownTimeout = 200 * time.Millisecond
	specA, specB := destSpec("a", a.addr), destSpec("b", b.addr)
	writeFile(t, path, specA, specB)
	g := startGateway(t, cfg)
	running := func(name string) *member {
		g.dmu.Lock()
		defer g.dmu.Unlock()
		for _, m := range g.dmu.members {
			if m.name == name {
				return m
			}
		}
		return nil
	}
	first := running("a")
	bound := func() int64 { return first.dest.(*client.Dest).Config().QueueBytes }
	if got, want := bound(), cfg.Pipeline.QueueMaxBytes/2; got != want {
		t.Fatalf("a's queue-bytes beside b = %d, want %d", got, want)
	}
	handed := counterValue(t, "otlpgate_client_handed_over_requests_total", "a")
	send := func(from, to uint64) {
		t.Helper()
		for id := from; id < to; id++ {
			if code := post(t, g, traceBody(t, 0, id)); code != 200 {
				t.Fatalf("POST span %d: %d", id, code)
			}
		}
	}
	arrived := func(u *upstream, from, to uint64) func() bool {
		return func() bool {
			for id := from; id < to; id++ {
				if u.count(id) == 0 {
					return false
				}
			}
			return true
		}
	}

	a.hold()
	send(1, 6) // at most 5 calls, fewer than a's 8 workers: all in flight at once
	eventually(t, func() string { return "a's upstream did not take spans 1..5" }, arrived(a, 1, 6))
	reload := func(wantBound int64, lines ...string) {
		t.Helper()
		writeFile(t, path, lines...)
		if err := g.Reload(); err != nil {
			t.Fatal(err)
		}
		if m := running("a"); m != first {
			t.Errorf("the reload to %d destination(s) replaced a, which did not change", len(lines))
		}
		if got := bound(); got != wantBound {
			t.Errorf("a's queue-bytes with %d destination(s) = %d, want %d", len(lines), got, wantBound)
		}
		// The drains the reload began are over: b's, and a's hand-over had it been replaced.
		g.retiring.Wait()
	}
	reload(cfg.Pipeline.QueueMaxBytes, specA)
	reload(cfg.Pipeline.QueueMaxBytes/2, specA, specB)
	a.release()
	send(6, 11)
	eventually(t, func() string { return "a did not get 1..10" }, arrived(a, 1, 11))
	eventually(t, func() string { return "b did not get 1..10" }, arrived(b, 1, 11))
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for id := uint64(1); id < 11; id++ {
		if n := a.count(id); n != 1 {
			t.Errorf("span %d reached a %d times, want once", id, n)
		}
		if n := b.count(id); n != 1 {
			t.Errorf("span %d reached b %d times, want once", id, n)
		}
	}
	if n := counterValue(t, "otlpgate_client_handed_over_requests_total", "a") - handed; n != 0 {
		t.Errorf("a handed %v requests over to a replacement", n)
	}
}
