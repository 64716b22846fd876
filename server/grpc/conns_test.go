package grpcserver

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// settle waits (bounded) for goroutines and descriptors to come back to at most the baseline.
func settle(t *testing.T, goroutines, fds int) (int, int) {
	t.Helper()
	var g, f int
	for range 500 {
		g, f = runtime.NumGoroutine(), openFDs(t)
		if g <= goroutines && f <= fds {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g, f
}

// 10,000 connections opened and closed, half of them after a real call, leak neither
// descriptors nor goroutines.
func TestConnectionChurnLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	addr := e.srv.Addr().String()
	// One call first, so the long-lived client connections of the harness exist in the baseline.
	c := otepv1.NewUnaryExporterClient(e.conn)
	if _, err := c.ExportTraces(context.Background(), &otepv1.TraceExportRequest{Id: 1}); err != nil {
		t.Fatal(err)
	}
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	for i := range 10_000 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if i%2 == 0 {
			// Half send the HTTP/2 preface and some garbage before closing.
			conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00garbage"))
		}
		conn.Close()
	}
	if g, f := settle(t, g0, f0); g > g0 || f > f0 {
		t.Fatalf("after 10,000 connections: %d goroutines (was %d), %d descriptors (was %d)", g, g0, f, f0)
	}
}
