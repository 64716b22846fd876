package grpcserver

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// A call the intake limiter refuses within -intake.wait ends with RESOURCE_EXHAUSTED and
// RetryInfo set to the wait, on v1 and on the OTEP unary service alike, on both transports,
// and the refusal is counted once per call.
func TestIntakeBusyAnswer(t *testing.T) { onTransports(t, testIntakeBusyAnswer) }

func testIntakeBusyAnswer(t *testing.T, tr string) {
	const maxBytes = 4 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: maxBytes, MaxDecodes: 2, Wait: 30 * time.Millisecond})
	sc := configFor(tr)
	sc.MaxRecvMsgSize = 4 << 20
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := traceBody(t, 1, 3)
	var r rawBytes = body
	var o rawBytes = otepReq(t, 7, body)
	v1 := func() error {
		return e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{})
	}
	otep := func() (*otepv1.ExportResponse, error) {
		resp := &otepv1.ExportResponse{}
		return resp, e.raw.Invoke(ctx, "/otlpgate.otep.v1.UnaryExporter/ExportTraces", o.raw(), resp)
	}
	// The whole budget is taken: no message finds room, whatever its reservation (the
	// largest message on grpc-go's path, the message's own length on the own transport).
	if !lim.AcquireBytes(admission.IntakeGRPC, maxBytes, nil) {
		t.Fatal("cannot take the budget")
	}
	refused := intakeRefused(t, "grpc", "bytes")
	for name, call := range map[string]func() error{"v1": v1, "otep": func() error { _, err := otep(); return err }} {
		st := status.Convert(call())
		if st.Code() != codes.ResourceExhausted || retryDelay(st) != 30*time.Millisecond {
			t.Fatalf("%s while busy: %v, retry delay %v; want RESOURCE_EXHAUSTED with 30ms", name, st, retryDelay(st))
		}
	}
	if got := intakeRefused(t, "grpc", "bytes") - refused; got != 2 {
		t.Fatalf("otlpgate_intake_refused_total{intake=grpc,resource=bytes} grew by %v, want 2", got)
	}
	lim.ReleaseBytes(admission.IntakeGRPC, maxBytes)
	if err := v1(); err != nil {
		t.Fatalf("v1 with room: %v", err)
	}
	if resp, err := otep(); err != nil || resp.Id != 7 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("otep with room: %v, %v", resp, err)
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 6 {
		t.Fatalf("delivered %d spans, want 6", items)
	}
	if lim.Bytes() != 0 {
		t.Fatalf("limiter holds %d bytes after the calls", lim.Bytes())
	}
}

// With -ack=upstream the receive reservation is given back once the request is admitted, not
// when the upstream answers. The reservation is the largest message on grpc-go's path (which
// reserves before the message's length is known) and the message's own length on the own
// transport (which reserves at its prefix).
func TestIntakeReleasedBeforeUpstream(t *testing.T) {
	onTransports(t, testIntakeReleasedBeforeUpstream)
}

func testIntakeReleasedBeforeUpstream(t *testing.T, tr string) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 16 << 20, Wait: time.Minute})
	sc := configFor(tr)
	sc.Limiter = lim
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, sc, rec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r rawBytes = traceBody(t, 2, 4)
	done := make(chan error, 1)
	go func() {
		done <- e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{})
	}()
	for i := 0; ; i++ {
		e.p.Flush()
		if got, _ := totals(rec); len(got) == 1 {
			break
		}
		if i == 10000 {
			t.Fatal("the request never reached the destination")
		}
		time.Sleep(time.Millisecond)
	}
	if got := lim.Bytes(); got != 0 {
		t.Fatalf("limiter holds %d bytes while the call waits for its upstream, want 0", got)
	}
	want := int64(sc.MaxRecvMsgSize)
	if tr == TransportOwn {
		want = int64(len(r))
	}
	if lim.HighWaterBytes() != want {
		t.Fatalf("high water %d, want one reservation of %d", lim.HighWaterBytes(), want)
	}
	rec.Release(true)
	if err := <-done; err != nil {
		t.Fatalf("call: %v", err)
	}
}

// Many concurrent large calls: the reservations (and so the messages received at once) stay
// within -intake.max-bytes, and every call is delivered: a call that finds no room waits for
// it (-intake.wait) rather than being refused, on both transports.
func TestManyConcurrentCallsBounded(t *testing.T) { onTransports(t, testManyConcurrentCallsBounded) }

func testManyConcurrentCallsBounded(t *testing.T, tr string) {
	const calls = 64
	const maxBytes = 8 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: maxBytes, Wait: time.Minute})
	sc := configFor(tr)
	sc.MaxRecvMsgSize = 2 << 20
	sc.Limiter = lim
	pc := testPipelineConfig()
	pc.QueueMaxBytes = 1 << 30
	e := start(t, pc, sc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var r rawBytes = traceBody(t, 3, 4000) // about 1MiB
	if len(r) < 1<<19 || len(r) > sc.MaxRecvMsgSize {
		t.Fatalf("request of %d bytes", len(r))
	}
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != calls*4000 {
		t.Fatalf("delivered %d spans, want %d", items, calls*4000)
	}
	t.Logf("%d concurrent %d-byte calls: limiter high water %d of %d bytes", calls, len(r), lim.HighWaterBytes(), maxBytes)
	if lim.HighWaterBytes() > maxBytes || lim.Bytes() != 0 {
		t.Fatalf("high water %d (bound %d), %d still held", lim.HighWaterBytes(), maxBytes, lim.Bytes())
	}
}

// A call that finds no room in the intake limiter waits for it, unanswered and undelivered, up
// to -intake.wait, and is delivered once room comes; a waiting call its client gives up ends
// its wait and holds nothing. On both transports: grpc-go's path waits before it reads the
// message, the own transport once the message's prefix came.
func TestIntakeWaitsForRoom(t *testing.T) { onTransports(t, testIntakeWaitsForRoom) }

func testIntakeWaitsForRoom(t *testing.T, tr string) {
	const maxBytes = 4 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: maxBytes, Wait: time.Minute})
	sc := configFor(tr)
	sc.MaxRecvMsgSize = maxBytes
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := traceBody(t, 8, 3)
	call := func(ctx context.Context) error {
		var r rawBytes = body
		return e.raw.Invoke(ctx, tracesPath, r.raw(), &coltracev1.ExportTraceServiceResponse{})
	}
	waiting := func() bool { return lim.BytesWaiting(admission.IntakeGRPC) == 1 }

	if !lim.AcquireBytes(admission.IntakeGRPC, maxBytes, nil) {
		t.Fatal("cannot take the budget")
	}
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	testkit.WaitFor(t, "the call to wait for room", waiting)
	select {
	case err := <-done:
		t.Fatalf("the call was answered (%v) while it waited for room", err)
	default:
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 0 {
		t.Fatalf("%d spans delivered before the call had room", items)
	}
	lim.ReleaseBytes(admission.IntakeGRPC, maxBytes)
	if err := <-done; err != nil {
		t.Fatalf("call once the budget had room: %v", err)
	}
	e.p.Flush()
	if got, items := totals(e.rec); items != 3 || !bytes.Equal(bytes.Join(got, nil), body) {
		t.Fatalf("delivered %d spans, want the request", items)
	}
	testkit.WaitFor(t, "the call's bytes to come back", func() bool { return lim.Bytes() == 0 })

	// The client gives up a waiting call: the wait ends at once, not at -intake.wait.
	if !lim.AcquireBytes(admission.IntakeGRPC, maxBytes, nil) {
		t.Fatal("cannot take the budget")
	}
	gctx, giveUp := context.WithCancel(ctx)
	go func() { done <- call(gctx) }()
	testkit.WaitFor(t, "the call to wait for room", waiting)
	giveUp()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("call given up: %v, want CANCELED", err)
	}
	testkit.WaitFor(t, "the given-up call's wait to end", func() bool { return lim.BytesWaiting(admission.IntakeGRPC) == 0 })
	lim.ReleaseBytes(admission.IntakeGRPC, maxBytes)
	testkit.WaitFor(t, "the budget to come back", func() bool { return lim.Bytes() == 0 })
	if err := call(ctx); err != nil {
		t.Fatalf("call after the given-up one: %v", err)
	}
}
