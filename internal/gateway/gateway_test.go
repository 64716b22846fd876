package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/client"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// A gateway built from a Config with port 0 listeners serves both network intakes and the
// admin endpoints on the addresses it reports, delivers every span to its upstream, and stops
// without a loss.
func TestGatewayServesAndStops(t *testing.T) {
	up := startUpstream(t)
	cfg := testConfig()
	cfg.Destinations = []client.Config{destTo("serve", up.addr)}
	g := startGateway(t, cfg)
	if code, body := get(t, g, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	for id := uint64(1); id <= 20; id++ {
		if code := post(t, g, traceBody(t, 0, id)); code != http.StatusOK {
			t.Fatalf("POST span %d: status %d", id, code)
		}
	}
	conn, err := grpc.NewClient(g.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for id := uint64(21); id <= 40; id++ {
		var req coltracev1.ExportTraceServiceRequest
		if err := req.UnmarshalVT(traceBody(t, 0, id)); err != nil {
			t.Fatal(err)
		}
		if _, err := coltracev1.NewTraceServiceClient(conn).Export(context.Background(), &req); err != nil {
			t.Fatalf("Export span %d: %v", id, err)
		}
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for id := uint64(1); id <= 40; id++ {
		if n := up.count(id); n != 1 {
			t.Errorf("span %d arrived %d times", id, n)
		}
	}
	if _, err := net.DialTimeout("tcp", g.GRPCAddr().String(), time.Second); err == nil {
		t.Error("the gRPC intake still accepts after Shutdown")
	}
}

// What an upstream never acknowledged by the end of the shutdown timeout is a loss, and
// Shutdown says so with a *LossError.
func TestShutdownLossIsTyped(t *testing.T) {
	up := startUpstream(t)
	up.hold()
	cfg := testConfig()
	cfg.ShutdownTimeout = time.Second
	cfg.Destinations = []client.Config{destTo("lossy", up.addr)}
	g := startGateway(t, cfg)
	if code := post(t, g, traceBody(t, 0, 1)); code != http.StatusOK {
		t.Fatalf("POST: status %d", code)
	}
	eventually(t, func() string { return "the upstream never got the batch" }, func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.waiting > 0
	})
	err := g.Shutdown(context.Background())
	var lost *LossError
	if !errors.As(err, &lost) || len(lost.Errs) == 0 {
		t.Fatalf("Shutdown returned %v, want a *LossError", err)
	}
	if again := g.Shutdown(context.Background()); again != err {
		t.Errorf("a second Shutdown returned %v, want the first's result", again)
	}
}

// A listener that cannot bind fails Start with an error that names it, and what New and
// Start had started is stopped again (goleak checks the goroutines).
func TestStartFailureStopsEverything(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	up := startUpstream(t)
	cfg := testConfig()
	cfg.HTTP.Listen = taken.Addr().String()
	cfg.Destinations = []client.Config{destTo("nostart", up.addr)}
	g, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	err = g.Start(context.Background())
	if err == nil {
		t.Fatal("Start succeeded on a taken port")
	}
	if want := fmt.Sprintf("cannot listen on %s", taken.Addr()); !strings.Contains(err.Error(), want) {
		t.Errorf("Start: %v, want it to say %q", err, want)
	}
	if err2 := g.Shutdown(context.Background()); err2 != err {
		t.Errorf("Shutdown after a failed Start: %v, want %v", err2, err)
	}
}

// An invalid configuration is refused by New before anything starts.
func TestNewValidates(t *testing.T) {
	cfg := testConfig()
	cfg.Destinations = []client.Config{destTo("twice", "127.0.0.1:1"), destTo("twice", "127.0.0.1:2")}
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "two destinations are named") {
		t.Fatalf("New: %v", err)
	}
}

// A part that fails to build after others were (here the UDS intake, whose group does not
// exist, after the destinations, the pipeline and the gRPC intake) fails New, and what was built
// is released: goleak finds none of its goroutines.
func TestNewFailureReleases(t *testing.T) {
	up := startUpstream(t)
	cfg := testConfig()
	cfg.UDS.Listen = filepath.Join(t.TempDir(), "oc.sock")
	cfg.UDS.Group = "otlpgate-no-such-group"
	cfg.Destinations = []client.Config{destTo("nobuild", up.addr)}
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "otlpgate-no-such-group") {
		t.Fatalf("New: %v", err)
	}
}
