package admin

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPprofListener(t *testing.T) {
	cfg := DefaultPprofConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.MaxDuration = 2 * time.Second
	l, err := NewPprof(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	base := "http://" + l.Addr().String() + "/debug/pprof/"

	if code, body := get(t, base); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("index: %d", code)
	}
	if code, body := get(t, base+"goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200s", code, body)
	}
	// The command line may hold -dest headers and other secrets.
	if code, body := get(t, base+"cmdline"); code != 404 || strings.Contains(body, "test") {
		t.Fatalf("cmdline served: %d %q", code, body)
	}
	before := testutil.ToFloat64(pprofRefused)
	for _, q := range []string{"profile?seconds=3", "profile?seconds=100000", "trace?seconds=9", "profile?seconds=-1", "profile?seconds=x"} {
		if code, body := get(t, base+q); code != 400 || !strings.Contains(body, "-pprof.max-duration") {
			t.Errorf("%s: %d %q, want 400", q, code, body)
		}
	}
	if got := testutil.ToFloat64(pprofRefused) - before; got != 5 {
		t.Errorf("otlpgate_pprof_refused_total moved by %v, want 5", got)
	}
	if code, body := get(t, base+"profile?seconds=1"); code != 200 || len(body) == 0 {
		t.Errorf("a 1 s profile within the bound: %d, %d bytes", code, len(body))
	}
}

func TestPprofValidate(t *testing.T) {
	for _, c := range []struct {
		listen string
		ok     bool
	}{
		{"", true},
		{"127.0.0.1:6060", true},
		{"localhost:6060", true},
		{"[::1]:6060", true},
		{":6060", false},
		{"0.0.0.0:6060", false},
		{"10.1.2.3:6060", false},
		{"nohostport", false},
	} {
		cfg := DefaultPprofConfig()
		cfg.Listen = c.listen
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", c.listen, err, c.ok)
		}
	}
	if l, err := NewPprof(DefaultPprofConfig(), slog.New(slog.DiscardHandler)); l != nil || err != nil {
		t.Errorf("off by default: %v %v", l, err)
	}
}
