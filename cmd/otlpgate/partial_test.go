package main

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// boastingSink is a v1 trace upstream that takes every span and answers each export with a
// partial success claiming a million spans rejected, with a long message.
type boastingSink struct {
	coltracev1.UnimplementedTraceServiceServer
	spans, calls atomic.Int64
}

const boastMessage = "tenant over its span quota: "

func (s *boastingSink) Export(_ context.Context, r *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	for _, rs := range r.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans.Add(int64(len(ss.Spans)))
		}
	}
	s.calls.Add(1)
	return &coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
		RejectedSpans: 1_000_000, ErrorMessage: boastMessage + strings.Repeat("x", 4096),
	}}, nil
}

// An operator reading the counters of a destination whose upstream reports a million spans
// rejected per request, while 1,000 spans were sent in all: otlpgate counts 1,000 rejected
// (each request's spans at most), every answer as impossible, none dropped; the log says so and
// quotes the upstream, cut; /status.json shows the upstream's message as the last error.
func TestBinaryPartialSuccessCountedWithinTheBatch(t *testing.T) {
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &boastingSink{}
	srv := grpc.NewServer()
	coltracev1.RegisterTraceServiceServer(srv, sink)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Stop(); <-done }()

	g := startGateway(t, bin, "-http.listen", "", "-kafka.listen", "", "-status.interval", "200ms", "-batch.max-age", "20ms",
		"-dest", "name=boaster,endpoint="+ln.Addr().String()+",protocol=v1,mode=unary")
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := coltracev1.NewTraceServiceClient(conn)
	gen := otlpgen.New(11)
	const requests, spans = 100, 10
	for range requests {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := tc.Export(ctx, gen.Spans(otlpgen.Shape{Spans: spans, Attrs: 2}), grpc.WaitForReady(true))
		cancel()
		if err != nil {
			t.Fatalf("export: %v\n%s", err, g.stderr.String())
		}
	}
	dest := `destination="boaster"`
	deadline := time.Now().Add(30 * time.Second)
	for sink.spans.Load() < requests*spans || scrape(t, g.admin, "otlpgate_client_acknowledged_items_total", dest) < requests*spans {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream got %d of %d spans\n%s", sink.spans.Load(), requests*spans, g.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := sink.spans.Load(); got != requests*spans {
		t.Errorf("the upstream got %d spans, want %d", got, requests*spans)
	}
	calls := float64(sink.calls.Load())
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"otlpgate_client_partially_rejected_items_total", requests * spans},
		{"otlpgate_client_impossible_partial_successes_total", calls},
		{"otlpgate_client_acknowledged_items_total", requests * spans},
		{"otlpgate_client_dropped_items_total", 0},
	} {
		if got := scrape(t, g.admin, c.metric, dest); got != c.want {
			t.Errorf("%s = %v, want %v (%v calls)", c.metric, got, c.want, calls)
		}
	}
	log := g.stderr.String()
	if !strings.Contains(log, "upstream reported a partial success outside the request's items") ||
		!strings.Contains(log, "reported=1000000") || !strings.Contains(log, boastMessage) {
		t.Errorf("no log line of the impossible partial success quoting the upstream:\n%s", log)
	}
	if strings.Contains(log, strings.Repeat("x", 1024)) {
		t.Error("the log quotes the upstream's message uncut")
	}
	var st statusDoc
	deadline = time.Now().Add(30 * time.Second)
	for {
		st = fetchStatus(t, g.admin)
		if last := boasterLastError(st); strings.Contains(last, boastMessage) {
			if !strings.HasPrefix(last, "partial success: the upstream reported 1000000 of ") || len(last) > 600 {
				t.Errorf("last error %q, want the partial success, cut", last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status.json never showed the upstream's message: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func boasterLastError(st statusDoc) string {
	for _, d := range st.Destinations {
		if d.Name == "boaster" {
			return d.LastError
		}
	}
	return ""
}
