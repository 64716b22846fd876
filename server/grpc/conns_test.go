package grpcserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

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
	g0, f0 := runtime.NumGoroutine(), testkit.OpenFDs(t)
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
	testkit.WaitFor(t, fmt.Sprintf("goroutines and descriptors to come back to %d and %d after 10,000 connections", g0, f0), func() bool {
		return runtime.NumGoroutine() <= g0 && testkit.OpenFDs(t) <= f0
	})
}

// One address gets at most MaxConnectionsPerPeer connections; the others are closed as soon as
// accepted and counted, while another address still connects.
func TestConnectionsPerPeer(t *testing.T) {
	sc := DefaultConfig()
	sc.MaxConnectionsPerPeer = 2
	e := start(t, testPipelineConfig(), sc, nil)
	addr := e.srv.Addr().String()
	before := testutil.ToFloat64(refusedPerPeer)
	var cs []*rawH2
	for range 4 {
		cs = append(cs, dialH2(t, addr, "127.0.0.2", nil, 1<<20))
	}
	for _, c := range cs[2:] {
		c.waitClosed(t, 10*time.Second)
	}
	if got := testutil.ToFloat64(refusedPerPeer) - before; got != 2 {
		t.Fatalf("refused %v connections, want 2", got)
	}
	for i, c := range cs[:2] {
		if c.isClosed() {
			t.Fatalf("connection %d within the cap was closed", i)
		}
	}
	// Another address is served.
	c := otepv1.NewUnaryExporterClient(e.conn)
	if _, err := c.ExportTraces(context.Background(), &otepv1.TraceExportRequest{Id: 1}); err != nil {
		t.Fatal(err)
	}
}

// A call whose message stays unfinished past RecvTimeout closes its connection, over TLS too
// (the frames are followed in clear text, above TLS); so does a call that sends headers and no
// body.
func TestRecvTimeoutClosesConnection(t *testing.T) {
	p := newPKI(t)
	for _, tlsOn := range []bool{false, true} {
		sc := DefaultConfig()
		sc.RecvTimeout = 300 * time.Millisecond
		var tc *tls.Config
		if tlsOn {
			sc.TLSCert, sc.TLSKey = p.certFile, p.keyFile
			tc = &tls.Config{RootCAs: p.caPool, ServerName: "127.0.0.1"}
		}
		addr := startTLS(t, sc)
		for _, body := range []bool{true, false} {
			before := testutil.ToFloat64(closedConns[closeRecvTimeout])
			c := dialH2(t, addr, "", tc, 1<<20)
			id := c.open(t, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
			if body {
				c.data(t, id, grpcMsg(0, nil))                  // an empty request: answered
				c.data(t, id, grpcMsg(1000, make([]byte, 100))) // the next, unfinished
			}
			c.waitClosed(t, 30*time.Second)
			if got := testutil.ToFloat64(closedConns[closeRecvTimeout]) - before; got != 1 {
				t.Fatalf("tls=%v body=%v: recv_timeout closes %v, want 1", tlsOn, body, got)
			}
		}
	}
}

// A connection whose unfinished messages pass MaxConnRecvBytes beyond their initial window is
// closed at once. Within the window (64 KiB here) concurrent uploads may park a message each.
func TestConnRecvBytesClosesConnection(t *testing.T) {
	sc := DefaultConfig()
	sc.InitialWindowSize = 64 << 10
	sc.MaxRecvMsgSize = 1 << 20
	sc.MaxConnRecvBytes = 1 << 20
	e := start(t, testPipelineConfig(), sc, nil)
	before := testutil.ToFloat64(closedConns[closeRecvBytes])
	c := dialH2(t, e.srv.Addr().String(), "", nil, 1<<20)
	chunk := make([]byte, 16<<10)
	for range 8 { // 8 × 64 KiB within the window: 512 KiB parked, nothing counted
		id := c.open(t, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
		c.data(t, id, grpcMsg(1<<20-5, chunk[:16<<10-5]))
		for range 3 {
			c.data(t, id, chunk)
		}
	}
	// Streams 1 and 3 are being read: their handlers asked for the whole message. 600 KiB
	// more of each, beyond the window, crosses the cap.
	c.waitWindow(t, 1, 3)
	if c.isClosed() {
		t.Fatal("closed for messages within their window")
	}
	for range 600 / 16 {
		for _, id := range []uint32{1, 3} {
			c.mu.Lock()
			c.fr.WriteData(id, false, chunk)
			c.mu.Unlock()
		}
	}
	c.waitClosed(t, 30*time.Second)
	if got := testutil.ToFloat64(closedConns[closeRecvBytes]) - before; got != 1 {
		t.Fatalf("recv_bytes closes %v, want 1", got)
	}
}
