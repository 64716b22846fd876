package main

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// strictStreamUpstream is an OTEP stream upstream that, like a Collector that cannot decode a
// request, ends the whole stream with INTERNAL when it reads a request holding a span named
// "poison"; it answers every other request Success and keeps its span ids.
type strictStreamUpstream struct {
	otepv1.UnimplementedStreamExporterServer
	addr string

	mu      sync.Mutex
	spans   map[uint64]int // span id -> requests answered Success that held it
	poisons int            // requests read holding the poison span
}

func startStrictStreamUpstream(t *testing.T) *strictStreamUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &strictStreamUpstream{addr: ln.Addr().String(), spans: map[uint64]int{}}
	srv := grpc.NewServer()
	otepv1.RegisterStreamExporterServer(srv, u)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return u
}

func (u *strictStreamUpstream) ExportTraces(st grpc.BidiStreamingServer[otepv1.TraceExportRequest, otepv1.ExportResponse]) error {
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					if sp.Name == "poison" {
						u.mu.Lock()
						u.poisons++
						u.mu.Unlock()
						return status.Error(codes.Internal, "grpc: error unmarshalling request: proto: cannot parse invalid wire-format data")
					}
				}
			}
		}
		u.mu.Lock()
		for _, id := range testkit.ResourceSpanIDs(req.ResourceSpans) {
			u.spans[id]++
		}
		u.mu.Unlock()
		if err := st.Send(&otepv1.ExportResponse{Id: req.Id, ResultCode: otepv1.ResultCode_Success}); err != nil {
			return err
		}
	}
}

// missing counts the ids of want not answered yet.
func (u *strictStreamUpstream) missing(want []uint64) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, id := range want {
		if u.spans[id] == 0 {
			n++
		}
	}
	return n
}

func (u *strictStreamUpstream) poisonReads() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.poisons
}

// With the spool (no retry budget: RetryMaxElapsed is 0), an OTEP stream upstream that cannot
// decode one spooled request: the spans sent before and after it arrive, the request is
// dropped as poison (counted by the destination, and dropped from the spool as undeliverable),
// and the destination catches up with the spool instead of holding the record, and re-sending
// it, for ever.
func TestSpoolPoisonRequestDropped(t *testing.T) {
	bin := buildBinary(t)
	u := startStrictStreamUpstream(t)
	g := spoolGateway(t, bin, t.TempDir(), u.addr)
	l := newLoader(7, otlpgen.Shape{Spans: 5, Attrs: 2})
	before := sendAcked(t, g, l, 20)
	testkit.WaitFor(t, "the spans sent before the poison to arrive", func() bool { return u.missing(before) == 0 })

	// The poison, alone in its batch: the batches before it are delivered, and the ones after
	// it are sent only once it was read.
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	poison := &otepv1.TraceExportRequest{Id: 1, ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
		Spans: []*tracev1.Span{{Name: "poison", TraceId: bytes.Repeat([]byte{7}, 16), SpanId: bytes.Repeat([]byte{7}, 8)}},
	}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	resp, err := otepv1.NewUnaryExporterClient(conn).ExportTraces(ctx, poison)
	cancel()
	if err != nil || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("poison not spooled: %v %v", resp, err)
	}
	testkit.WaitFor(t, "the upstream to read the poison", func() bool { return u.poisonReads() > 0 })

	after := sendAcked(t, g, l, 20)
	testkit.WaitFor(t, "the spans sent after the poison to arrive", func() bool { return u.missing(after) == 0 })
	testkit.WaitFor(t, "the poison to be dropped", func() bool {
		return scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`, `reason="stream_poison"`) > 0
	})
	testkit.WaitFor(t, "the destination to catch up with the spool", func() bool {
		return scrape(t, g.admin, "otlpgate_spool_oldest_unfinished_age_seconds") == 0
	})
	if v := scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`, `reason="stream_poison"`); v != 1 {
		t.Errorf("client dropped items (stream_poison) %v, want 1", v)
	}
	if v := scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`); v != 1 {
		t.Errorf("client dropped items, all reasons, %v, want 1", v)
	}
	if v := scrape(t, g.admin, "otlpgate_spool_dropped_records_total", `destination="up"`, `reason="undeliverable"`); v != 1 {
		t.Errorf("spool dropped records (undeliverable) %v, want 1", v)
	}
	// Alone on its stream from the start (nothing else was pending): one read per strike, and
	// a strike counts only once another request was delivered since the poison became a suspect
	// (client/poison.go), so the reads before the batches sent after it were delivered are
	// extra: a few, one per retry backoff.
	if n := u.poisonReads(); n < 3 || n > 8 {
		t.Errorf("poison read %d times, want 3 (poison-after's default) plus the reads before any other request was delivered, a few", n)
	}
	if n := u.missing(append(before, after...)); n != 0 {
		t.Errorf("%d spans missing", n)
	}
	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
}

// With the spool, an OTEP stream upstream that cannot decode the only request it is sent: no
// other traffic shows that the path works, so the destination probes the upstream with an empty
// request before each lone send; the upstream answers it, and the poison is dropped after
// poison-after strikes instead of being sent again for ever. The stop line reports the loss.
func TestSpoolLonePoisonRequestDropped(t *testing.T) {
	bin := buildBinary(t)
	u := startStrictStreamUpstream(t)
	g := spoolGateway(t, bin, t.TempDir(), u.addr)
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	poison := &otepv1.TraceExportRequest{Id: 1, ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
		Spans: []*tracev1.Span{{Name: "poison", TraceId: bytes.Repeat([]byte{9}, 16), SpanId: bytes.Repeat([]byte{9}, 8)}},
	}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	resp, err := otepv1.NewUnaryExporterClient(conn).ExportTraces(ctx, poison)
	cancel()
	if err != nil || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("poison not spooled: %v %v", resp, err)
	}
	testkit.WaitFor(t, "the poison to be dropped", func() bool {
		return scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`, `reason="stream_poison"`) == 1
	})
	testkit.WaitFor(t, "the destination to catch up with the spool", func() bool {
		return scrape(t, g.admin, "otlpgate_spool_oldest_unfinished_age_seconds") == 0
	})
	if v := scrape(t, g.admin, "otlpgate_spool_dropped_records_total", `destination="up"`, `reason="undeliverable"`); v != 1 {
		t.Errorf("spool dropped records (undeliverable) %v, want 1", v)
	}
	// Once, then alone once per strike: poison-after (3) lone reads, each after an answered probe.
	if n := u.poisonReads(); n != 4 {
		t.Errorf("poison read %d times, want 4: once, then alone once per strike", n)
	}
	u.mu.Lock()
	took := len(u.spans)
	u.mu.Unlock()
	if took != 0 {
		t.Errorf("upstream took %d spans, want none", took)
	}
	if lines := logLines(g, `msg="request dropped: every stream it was sent on alone ended with INTERNAL`, "destination=up", "items=1"); len(lines) != 1 {
		t.Errorf("%d lines say the poison was dropped, want 1:\n%s", len(lines), g.stderr.String())
	}
	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	checkStopLine(t, g, map[string]string{"lost": "true", "delivered_items": "0", "lost_items": "1",
		"unanswered_items": "0", "spooled_items": "0", "dropped": "stream_poison=1"})
}
