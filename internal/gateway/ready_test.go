package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/spool"
)

// fillUntilRefused posts padded one-span requests, ids from first, until one is refused with
// 429, and returns the ids acknowledged.
func fillUntilRefused(t *testing.T, g *Gateway, first uint64, pad int) []uint64 {
	t.Helper()
	var acked []uint64
	for id := first; ; id++ {
		if id-first > 10000 {
			t.Fatal("10000 requests admitted: nothing fills up")
		}
		switch code := post(t, g, traceBody(t, pad, id)); code {
		case http.StatusOK:
			acked = append(acked, id)
		case http.StatusTooManyRequests:
			return acked
		default:
			t.Fatalf("POST span %d: status %d", id, code)
		}
	}
}

// readyz is /readyz's status and body.
func readyz(t *testing.T, g *Gateway) (int, string) {
	t.Helper()
	return get(t, g, "/readyz")
}

// A gateway whose upstream stalls fills its queue: once requests are refused, /readyz answers
// 503 and says the queue is the reason; once the upstream answers again and the queue drains,
// /readyz answers 200, and every acknowledged span arrived.
func TestReadyzQueueFull(t *testing.T) {
	up := startUpstream(t)
	up.hold()
	cfg := testConfig()
	cfg.Pipeline.QueueMaxBytes = 1 << 20
	cfg.Pipeline.BatchMaxBytes = 64 << 10
	cfg.Pipeline.BatchMaxAge = 5 * time.Millisecond
	d := destTo("readyq", up.addr)
	d.QueueBytes = cfg.Pipeline.QueueMaxBytes
	cfg.Destinations = []client.Config{d}
	g := startGateway(t, cfg)
	if code, body := readyz(t, g); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz before = %d %q", code, body)
	}

	acked := fillUntilRefused(t, g, 1, 8<<10)
	code, body := readyz(t, g)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: queue: ") || !strings.Contains(body, "-queue.max-bytes") {
		t.Fatalf("/readyz with the queue full = %d %q (queued %d of %d)", code, body, g.Pipeline().QueuedBytes(), cfg.Pipeline.QueueMaxBytes)
	}
	t.Logf("%d requests acknowledged; %s", len(acked), strings.TrimSpace(body))

	up.release()
	eventually(t, func() string { _, b := readyz(t, g); return "/readyz still " + b }, func() bool {
		code, _ := readyz(t, g)
		return code == http.StatusOK
	})
	eventually(t, func() string { return "acknowledged spans missing upstream" }, func() bool {
		for _, id := range acked {
			if up.count(id) == 0 {
				return false
			}
		}
		return true
	})
}

// The intake limiter near its bound (what requests being received hold) makes /readyz fail
// with the limiter named; given back, /readyz answers 200 again.
func TestReadyzIntakeLimiter(t *testing.T) {
	up := startUpstream(t)
	cfg := testConfig()
	cfg.Destinations = []client.Config{destTo("readyl", up.addr)}
	g := startGateway(t, cfg)
	n := g.lim.MaxBytes() * 95 / 100
	if !g.lim.TryAcquireBytes(admission.IntakeGRPC, n) {
		t.Fatal("the limiter refused 95% of its budget while idle")
	}
	code, body := readyz(t, g)
	g.lim.ReleaseBytes(admission.IntakeGRPC, n)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "intake limiter: ") || !strings.Contains(body, "-intake.max-bytes") {
		t.Fatalf("/readyz with the limiter at 95%% = %d %q", code, body)
	}
	if code, body := readyz(t, g); code != http.StatusOK {
		t.Fatalf("/readyz after the bytes came back = %d %q", code, body)
	}
}

// With a spool, the spool filling up behind a stalled upstream makes /readyz fail with the
// spool named; once the upstream answers and finished segments are deleted, it answers 200.
func TestReadyzSpoolFull(t *testing.T) {
	up := startUpstream(t)
	up.hold()
	cfg := testConfig()
	cfg.Spool = spool.DefaultConfig()
	cfg.Spool.Dir = t.TempDir()
	cfg.Spool.Sync = spool.SyncNone
	cfg.Spool.SegmentBytes = 64 << 10
	cfg.Spool.MaxBytes = 512 << 10
	cfg.Spool.CheckpointInterval = 20 * time.Millisecond
	cfg.Pipeline.BatchMaxAge = 5 * time.Millisecond
	d := destTo("readys", up.addr)
	d.RetryMaxElapsed = 0
	cfg.Destinations = []client.Config{d}
	g := startGateway(t, cfg)
	if code, body := readyz(t, g); code != http.StatusOK {
		t.Fatalf("/readyz before = %d %q", code, body)
	}

	acked := fillUntilRefused(t, g, 1, 4<<10)
	code, body := readyz(t, g)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: spool: ") || !strings.Contains(body, "-spool.max-bytes") {
		t.Fatalf("/readyz with the spool full = %d %q", code, body)
	}
	t.Logf("%d requests acknowledged; %s", len(acked), strings.TrimSpace(body))

	up.release()
	eventually(t, func() string { _, b := readyz(t, g); return "/readyz still " + b }, func() bool {
		code, _ := readyz(t, g)
		return code == http.StatusOK
	})
	eventually(t, func() string { return "acknowledged spans missing upstream" }, func() bool {
		for _, id := range acked {
			if up.count(id) == 0 {
				return false
			}
		}
		return true
	})
}
