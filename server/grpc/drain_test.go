package grpcserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// waitDrained waits (boundedly) until n more idle streams than before were ended by shutdown.
func waitDrained(t *testing.T, before float64, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d idle streams to be ended by shutdown", n), func() bool {
		return testutil.ToFloat64(drainedStreams)-before >= float64(n)
	})
}

// An idle stream ends at once at shutdown, with an OK status, after its answers: Shutdown does
// not wait for the stream's next request (nor for its deadline, a minute here).
func TestShutdownEndsIdleStreams(t *testing.T) { onTransports(t, testShutdownEndsIdleStreams) }

func testShutdownEndsIdleStreams(t *testing.T, tr string) {
	e := start(t, testPipelineConfig(), configFor(tr), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := testutil.ToFloat64(drainedStreams)
	const streams = 3
	var ss []grpc.ClientStream
	body := traceBody(t, 9, 2)
	for i := range streams {
		s := e.rawStream(t, ctx)
		sendRaw(t, s, otepReq(t, uint64(10+i), body))
		resp, err := recvResp(t, s)
		if err != nil || resp.Id != uint64(10+i) || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("stream %d: %v, %v", i, resp, err)
		}
		ss = append(ss, s)
	}
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for i, s := range ss {
		if extra, err := drainEOF(s); err != nil || extra != 0 {
			t.Errorf("stream %d: %d extra answers, end %v; want a clean end", i, extra, err)
		}
	}
	if got := testutil.ToFloat64(drainedStreams) - before; got != streams {
		t.Errorf("%v streams ended idle, want %d", got, streams)
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 2*streams {
		t.Errorf("destination got %d spans, want %d", items, 2*streams)
	}
}

// Under -ack=upstream a stream whose request waits for the upstream is not cut at shutdown: the
// answer is sent once the upstream answered, and only then does the stream end.
func TestShutdownAnswersOwedBeforeEnding(t *testing.T) {
	onTransports(t, testShutdownAnswersOwedBeforeEnding)
}

func testShutdownAnswersOwedBeforeEnding(t *testing.T, tr string) {
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	pc.BatchMaxItems = 1 // one request, one batch
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, configFor(tr), rec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)
	sendRaw(t, s, otepReq(t, 42, traceBody(t, 5, 3)))
	testkit.WaitFor(t, "the batch to reach the destination", func() bool { return rec.Count() == 1 })
	before := testutil.ToFloat64(drainedStreams)
	shut := make(chan error, 1)
	go func() { shut <- e.srv.Shutdown(ctx) }()
	waitDrained(t, before, 1) // the stream is ended but still owes its answer
	select {
	case err := <-shut:
		t.Fatalf("shutdown returned (%v) with an answer owed", err)
	default:
	}
	rec.Release(true)
	resp, err := recvResp(t, s)
	if err != nil || resp.Id != 42 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("owed answer: %v, %v", resp, err)
	}
	if extra, err := drainEOF(s); err != nil || extra != 0 {
		t.Fatalf("after the answer: %d extra, %v", extra, err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, items := totals(rec); items != 3 {
		t.Errorf("destination got %d spans, want 3", items)
	}
}

// Readiness checks read Addr while Start binds the listener (cmd/otlpgate starts the admin
// server first); under -race this was a data race.
func TestAddrWhileStarting(t *testing.T) {
	p, err := pipeline.New(testPipelineConfig(), []pipeline.Destination{&testkit.Recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	srv, err := New(cfg, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	reads := make(chan int, 1)
	go func() {
		n := 0
		for ; !stop.Load(); n++ {
			srv.Addr()
		}
		reads <- n
	}()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	<-reads
	if srv.Addr() == nil {
		t.Error("Addr still nil after Start returned")
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A stream busy with a steady flow of requests when shutdown comes ends cleanly, and every
// request it answered Success reached the destination, exactly once: the handler and the
// stream's loop never both act on the stream (drain.go).
func TestShutdownUnderLoadKeepsEveryAnswer(t *testing.T) {
	onTransports(t, testShutdownUnderLoadKeepsEveryAnswer)
}

func testShutdownUnderLoadKeepsEveryAnswer(t *testing.T, tr string) {
	e := start(t, testPipelineConfig(), configFor(tr), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := otepv1.NewStreamExporterClient(e.conn).ExportTraces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const maxRequests = 20_000
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		gen := otlpgen.New(1) // the trace id of request n is n
		for id := uint64(1); id <= maxRequests; id++ {
			req := &otepv1.TraceExportRequest{Id: id, ResourceSpans: gen.Spans(otlpgen.Shape{Spans: 1, Attrs: 1}).ResourceSpans}
			if stream.Send(req) != nil {
				return // the server ended the stream
			}
		}
	}()
	answered := map[uint64]bool{}
	shut := make(chan error, 1)
	var end error
	for {
		resp, err := stream.Recv()
		if err != nil {
			end = err
			break
		}
		if resp.ResultCode != otepv1.ResultCode_Success || answered[resp.Id] {
			t.Fatalf("answer %v repeated or not Success", resp)
		}
		answered[resp.Id] = true
		if len(answered) == 200 {
			go func() { shut <- e.srv.Shutdown(ctx) }()
		}
	}
	<-sent
	if end != io.EOF {
		t.Fatalf("stream ended with %v, want a clean end", end)
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	e.p.Flush()
	batches, _ := totals(e.rec)
	delivered := map[uint64]int{}
	for _, b := range batches {
		var req coltracev1.ExportTraceServiceRequest
		if err := req.UnmarshalVT(b); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					delivered[binary.BigEndian.Uint64(sp.TraceId[8:])]++
				}
			}
		}
	}
	for id := range answered {
		if delivered[id] != 1 {
			t.Errorf("request %d answered Success, delivered %d times", id, delivered[id])
		}
	}
	t.Logf("%d answered, %d delivered before the stream ended", len(answered), len(delivered))
}
