package admin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testCounter = promauto.NewCounter(prometheus.CounterOpts{Name: "otlpgate_admin_test_total", Help: "test"})

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	var notReady error = errors.New("intake down")
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg, slog.New(slog.DiscardHandler), func() error { return notReady })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	base := "http://" + s.Addr().String()
	testCounter.Add(3)

	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "otlpgate_admin_test_total 3") ||
		!strings.Contains(body, "go_sched_gomaxprocs_threads") || !strings.Contains(body, "process_cpu_seconds_total") {
		t.Fatalf("/metrics: %d, missing series:\n%.500s", code, body)
	}
	// The status sampler gathers otlpgate's series only: the runtime's and the process's cost
	// it a millisecond and thousands of allocations per sample, and it shows none of them.
	fams, err := s.sampler.g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	own := false
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "go_") || strings.HasPrefix(f.GetName(), "process_") {
			t.Errorf("the status sampler gathers %s", f.GetName())
		}
		own = own || f.GetName() == "otlpgate_admin_test_total"
	}
	if !own {
		t.Error("the status sampler does not gather otlpgate's series")
	}
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "intake down") {
		t.Fatalf("/readyz not ready: %d %q", code, body)
	}
	notReady = nil
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz ready: %d", code)
	}
	// Profiles are not on the admin listener: it is the one the manifests expose.
	if code, _ := get(t, base+"/debug/pprof/"); code != 404 {
		t.Fatalf("/debug/pprof/ on the admin listener: %d, want 404", code)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{DefaultConfig(), true},
		{Config{}, true},
		{Config{Listen: "nohostport", ReadHeaderTimeout: 1}, false},
		{Config{Listen: "127.0.0.1:1", ReadHeaderTimeout: 0}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", c.cfg, err, c.ok)
		}
	}
}

// Once shutdown began /readyz fails, even though the intakes are still up, while /healthz and
// /metrics keep answering.
func TestReadyzFailsWhileDraining(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg, slog.New(slog.DiscardHandler), func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	base := "http://" + s.Addr().String()
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz before: %d %q", code, body)
	}
	s.Drain()
	if code, body := get(t, base+"/readyz"); code != 503 || body != "not ready: shutting down\n" {
		t.Fatalf("/readyz draining: %d %q", code, body)
	}
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz draining: %d %q", code, body)
	}
}
