package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/spool"
	"github.com/otlpgate/otlpgate/spool/feed"
)

// In front of a spool that cannot write (a full disk), a request is answered with
// backpressure (429, Retry-After) and counted under the reason the pipeline counts it by,
// spool_io, not as a full queue: one reason everywhere.
func TestSpoolWriteFailureCountedAsSpoolIO(t *testing.T) {
	fs := spool.NewCrashFS()
	sc := spool.DefaultConfig()
	sc.Dir, sc.Sync, sc.CheckpointInterval = "/spool", spool.SyncNone, time.Hour
	s, err := spool.Open(sc, fs, []string{"d"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := feed.NewAdmission(testPipelineConfig(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	srv, err := New(cfg, a, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, url: "http://" + ln.Addr().String(), hc: &http.Client{Timeout: time.Minute}}
	defer func() {
		e.hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	if r := e.post(t, "/v1/traces", traces(t, 1, 3)); r.status != http.StatusOK {
		t.Fatalf("before the failure: %d %s", r.status, r.body)
	}
	io := testutil.ToFloat64(ctr.refused[encProto][fastpath.Traces][admission.SpoolIO])
	ioItems := testutil.ToFloat64(ctr.refusedItems[encProto][fastpath.Traces][admission.SpoolIO])
	full := testutil.ToFloat64(ctr.refused[encProto][fastpath.Traces][admission.Full])
	fs.SetWriteErr(errors.New("ENOSPC"))
	r := e.post(t, "/v1/traces", traces(t, 2, 3))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Errorf("a spool that cannot write: %d, Retry-After %q; want 429 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	if got := testutil.ToFloat64(ctr.refused[encProto][fastpath.Traces][admission.SpoolIO]) - io; got != 1 {
		t.Errorf("refused requests counted as spool_io: %v, want 1", got)
	}
	if got := testutil.ToFloat64(ctr.refusedItems[encProto][fastpath.Traces][admission.SpoolIO]) - ioItems; got != 3 {
		t.Errorf("refused items counted as spool_io: %v, want 3", got)
	}
	if got := testutil.ToFloat64(ctr.refused[encProto][fastpath.Traces][admission.Full]) - full; got != 0 {
		t.Errorf("refused requests counted as queue_full: %v, want 0", got)
	}
}
