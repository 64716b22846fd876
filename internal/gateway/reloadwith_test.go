package gateway

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// ReloadWith applies a new -dest list whole, counting each reload: the spans after it reach
// the new destination only; a list that cannot run (an invalid value, none at all) is refused,
// counted, and the running set goes on.
func TestReloadWith(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	cfg := testConfig()
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	cfg.Dests = []string{destSpec("a", a.addr)}
	g := startGateway(t, cfg)
	reloads, failures := testutil.ToFloat64(configReloads), testutil.ToFloat64(configReloadFailures)
	send := func(id uint64) {
		t.Helper()
		if code := post(t, g, traceBody(t, 0, id)); code != 200 {
			t.Fatalf("POST: %d", code)
		}
	}
	send(1)
	eventually(t, func() string { return "span 1 missing at a" }, func() bool { return a.count(1) == 1 })

	if applied, err := g.ReloadWith([]string{destSpec("b", b.addr)}); !applied || err != nil {
		t.Fatalf("ReloadWith(b) = %v, %v", applied, err)
	}
	send(2)
	eventually(t, func() string { return "span 2 missing at b" }, func() bool { return b.count(2) == 1 })

	for _, dests := range [][]string{{"name=c,endpoint="}, nil} {
		if applied, err := g.ReloadWith(dests); applied || err == nil {
			t.Errorf("ReloadWith(%q) = %v, %v; want refused", dests, applied, err)
		}
	}
	send(3)
	eventually(t, func() string { return "span 3 missing at b" }, func() bool { return b.count(3) == 1 })
	if a.count(2)+a.count(3)+b.count(1) != 0 {
		t.Errorf("a span reached a destination not configured when it was sent")
	}
	if d := testutil.ToFloat64(configReloads) - reloads; d != 1 {
		t.Errorf("%v reloads counted, want 1", d)
	}
	if d := testutil.ToFloat64(configReloadFailures) - failures; d != 2 {
		t.Errorf("%v failures counted, want 2", d)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// A change of the destinations that only a restart can apply is refused, the error saying
// why: a gateway that started without a destination (the local file).
func TestReloadWithRefusesWhatTakesARestart(t *testing.T) {
	a := startUpstream(t)
	for _, c := range []struct {
		name  string
		dests []string
		next  []string
		want  string
	}{
		{"no destination", nil, []string{destSpec("a", a.addr)}, "giving it destinations takes a restart"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Dests = c.dests
			cfg.File.Path = t.TempDir() + "/otlp.jsonl"
			g, err := New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if applied, err := g.ReloadWith(c.next); applied || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReloadWith = %v, %v; want refused with %q", applied, err, c.want)
			}
			// The list as it runs: nothing to apply, and a reload counted as applied.
			reloads := testutil.ToFloat64(configReloads)
			if applied, err := g.ReloadWith(c.dests); !applied || err != nil {
				t.Errorf("ReloadWith(the running list) = %v, %v; want applied", applied, err)
			}
			if d := testutil.ToFloat64(configReloads) - reloads; d != 1 {
				t.Errorf("%v reloads counted, want 1", d)
			}
			if err := g.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
		})
	}
}
