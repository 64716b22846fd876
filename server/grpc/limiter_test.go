package grpcserver

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// inflateLimiter is the limiter whose inflate budget the compressors registered for this
// package's tests inflate into (nil: none), set by the test that needs one. Compressors are
// registered once, before any server or client exists, as gRPC requires: they reach the
// limiter of the moment through it.
var inflateLimiter atomic.Pointer[admission.Limiter]

type testInflateBudget struct{}

func (testInflateBudget) Acquire(n int) bool {
	if l := inflateLimiter.Load(); l != nil {
		return InflateBudget(l).Acquire(n)
	}
	return true
}

func (testInflateBudget) Release(n int) {
	if l := inflateLimiter.Load(); l != nil {
		InflateBudget(l).Release(n)
	}
}

func init() {
	cfg := codec.DefaultConfig()
	cfg.Budget, cfg.InflateClaim = testInflateBudget{}, DefaultConfig().MaxRecvMsgSize
	if err := codec.RegisterCompressorsWith(cfg); err != nil {
		panic(err)
	}
}

// useInflateLimiter makes lim the one the registered decompressors inflate into, until the
// test ends.
func useInflateLimiter(t *testing.T, lim *admission.Limiter) {
	inflateLimiter.Store(lim)
	t.Cleanup(func() { inflateLimiter.Store(nil) })
}

// inflatingTraces is a valid traces request of one span whose attribute value is size bytes of
// one letter: it compresses about a thousand times.
func inflatingTraces(t *testing.T, size int) []byte {
	t.Helper()
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
			TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "bomb",
			Attributes: []*commonv1.KeyValue{{Key: "k", Value: &commonv1.AnyValue{
				Value: &commonv1.AnyValue_StringValue{StringValue: strings.Repeat("a", size)}}}},
		}}}},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A compressed message is inflated into bytes of the intake limiter's inflate budget, claimed
// before the first byte past codec.FreeInflate is produced, beside the call's reservation for
// the compressed message: v1 and OTEP unary calls and an OTEP stream are delivered, and the
// limiter's high-water mark shows both. When the inflate budget is taken, a call waits for its
// claim without inflating anything (and without answering), then is delivered once the budget
// has room: it is never answered INTERNAL, which OTLP clients do not retry. On both transports;
// the call's reservation is the largest message on grpc-go's path, the compressed message's
// own length on the own transport.
func TestInflateHoldsIntakeLimiter(t *testing.T) { onTransports(t, testInflateHoldsIntakeLimiter) }

func testInflateHoldsIntakeLimiter(t *testing.T, tr string) {
	const inflated = 12 << 20
	maxRecv := int64(DefaultConfig().MaxRecvMsgSize)
	body := inflatingTraces(t, inflated)
	gz := grpc.UseCompressor(codec.Gzip)
	newEnv := func(t *testing.T) (*env, *admission.Limiter) {
		lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 64 << 20, InflateMaxBytes: maxRecv, Wait: 30 * time.Millisecond})
		useInflateLimiter(t, lim)
		sc := configFor(tr)
		sc.Limiter = lim
		return start(t, testPipelineConfig(), sc, nil), lim
	}
	v1 := func(ctx context.Context, e *env) error {
		var r rawBytes = body
		return e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{}, gz)
	}

	t.Run("delivered", func(t *testing.T) {
		e, lim := newEnv(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := v1(ctx, e); err != nil {
			t.Fatalf("v1: %v", err)
		}
		var o rawBytes = otepReq(t, 5, body)
		resp := &otepv1.ExportResponse{}
		if err := e.raw.Invoke(ctx, "/otlpgate.otep.v1.UnaryExporter/ExportTraces", o.raw(), resp, gz); err != nil || resp.Id != 5 || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("OTEP unary: %v, %v", resp, err)
		}
		s, err := e.raw.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/otlpgate.otep.v1.StreamExporter/ExportTraces", gz)
		if err != nil {
			t.Fatal(err)
		}
		sendRaw(t, s, otepReq(t, 6, body))
		s.CloseSend()
		if resp, err := recvResp(t, s); err != nil || resp.Id != 6 || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("OTEP stream: %v, %v", resp, err)
		}
		if _, err := drainEOF(s); err != nil {
			t.Fatalf("OTEP stream end: %v", err)
		}
		e.p.Flush()
		got, items := totals(e.rec)
		if items != 3 || !bytes.Equal(bytes.Join(got, nil), bytes.Repeat(body, 3)) {
			t.Fatalf("delivered %d spans (%d bytes), want the 3 inflated requests", items, len(bytes.Join(got, nil)))
		}
		reservation := maxRecv
		if tr == TransportOwn {
			reservation = 1 // at least: the compressed message's length
		}
		if h := lim.HighWaterBytes(); h < reservation+maxRecv {
			t.Fatalf("limiter high water %d, want a call's reservation (%d at least) and its inflate claim (%d)", h, reservation, maxRecv)
		}
		if lim.Bytes() != 0 {
			t.Fatalf("limiter holds %d after the calls", lim.Bytes())
		}
	})
	t.Run("waits for room", func(t *testing.T) {
		e, lim := newEnv(t)
		if !lim.AcquireInflate(admission.IntakeGRPC, maxRecv, 0, nil) {
			t.Fatal("cannot take the inflate budget")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- v1(ctx, e) }()
		testkit.WaitFor(t, "the call to wait for its claim", func() bool { return lim.InflateWaiting() == 1 })
		select {
		case err := <-done:
			t.Fatalf("the call was answered (%v) while it waited for its claim", err)
		default:
		}
		e.p.Flush()
		if _, items := totals(e.rec); items != 0 {
			t.Fatalf("%d spans delivered before the message could be inflated", items)
		}
		lim.ReleaseInflate(maxRecv)
		if err := <-done; err != nil {
			t.Fatalf("call after the budget had room: %v", err)
		}
		e.p.Flush()
		if got, items := totals(e.rec); items != 1 || !bytes.Equal(bytes.Join(got, nil), body) {
			t.Fatalf("delivered %d spans, want the inflated request", items)
		}
		testkit.WaitFor(t, "the call's bytes to come back", func() bool { return lim.Bytes() == 0 })
	})
}

// stall opens, on a connection of its own, n calls of the v1 Export method that send their
// headers and the prefix of a message of size bytes, and nothing more, as a client that stalls
// does: grpc-go's path reserves the largest message for such a call as its handler starts,
// the own transport reserves size bytes at the prefix. The connection ends with the test.
func stall(t *testing.T, e *env, n int, size uint32) *rawH2 {
	t.Helper()
	c := dialH2(t, e.srv.Addr().String(), "", nil, 0)
	pre := []byte{0, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
	for range n {
		c.data(t, c.open(t, tracesPath), pre)
	}
	return c
}

// The review's attack: one connection opens 16 calls that send HEADERS and the prefix of a
// message of the largest size, and nothing more. Its calls hold at most -intake.max-conn-bytes
// together (the others are refused, counted as conn_bytes); a well-behaved client on another
// connection is served throughout; and at -intake.progress-timeout the connection is closed
// and every byte it held comes back. On both transports.
func TestStalledCallsDoNotLockOutOthers(t *testing.T) {
	onTransports(t, testStalledCallsDoNotLockOutOthers)
}

func testStalledCallsDoNotLockOutOthers(t *testing.T, tr string) {
	const maxRecv, connCap, budget = 2 << 20, 8 << 20, 32 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: budget, MaxConnBytes: connCap, ProgressTimeout: 400 * time.Millisecond, Wait: 50 * time.Millisecond})
	sc := configFor(tr)
	sc.MaxRecvMsgSize = maxRecv
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	stalledBefore := intakeRefused(t, "grpc", "stalled")
	attacker := stall(t, e, 16, maxRecv)
	// The stalled calls hold what their connection may (or, without a cap, the whole budget).
	testkit.WaitFor(t, "the stalled calls to take their reservations", func() bool { return lim.Bytes() >= connCap })
	if got := lim.Bytes(); got > connCap {
		t.Fatalf("16 stalled calls of one connection hold %d bytes, cap %d", got, connCap)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r rawBytes = traceBody(t, 4, 3)
	for i := range 20 {
		if err := e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{}); err != nil {
			t.Fatalf("well-behaved call %d beside the stalled ones: %v", i, err)
		}
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 60 {
		t.Fatalf("delivered %d spans, want the 60 of the well-behaved calls", items)
	}
	// The progress deadline: the stalled connection is closed and its bytes return.
	testkit.WaitFor(t, "the stalled connection to be closed", func() bool {
		return intakeRefused(t, "grpc", "stalled")-stalledBefore == 1
	})
	testkit.WaitFor(t, "the stalled calls' bytes to come back", func() bool { return lim.Bytes() == 0 })
	// The calls over the connection's cap were refused, RESOURCE_EXHAUSTED (with the reset of
	// the rest of their message); the others ended with the connection.
	attacker.waitClosed(t, 30*time.Second)
	refusedCalls := 0
	for len(attacker.ends) > 0 {
		if end := <-attacker.ends; !end.reset {
			if end.status != "8" {
				t.Fatalf("stalled call %d ended with grpc-status %q, want 8 (RESOURCE_EXHAUSTED, over its connection's cap)", end.id, end.status)
			}
			refusedCalls++
		}
	}
	if refusedCalls != 12 {
		t.Fatalf("%d stalled calls refused over their connection's cap, want the 12 past its 4 reservations", refusedCalls)
	}
	// The well-behaved connection, which kept making calls, was never closed.
	if err := e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{}); err != nil {
		t.Fatalf("well-behaved call after the attack: %v", err)
	}
}

// The same attack spread over 16 connections, one stalled call each, takes the whole budget:
// the well-behaved client is refused (RESOURCE_EXHAUSTED with RetryInfo) until the progress
// deadline closes every stalled connection, and then served again. On both transports.
func TestStalledConnectionsClosedAtProgressDeadline(t *testing.T) {
	onTransports(t, testStalledConnectionsClosedAtProgressDeadline)
}

func testStalledConnectionsClosedAtProgressDeadline(t *testing.T, tr string) {
	const maxRecv, budget = 2 << 20, 32 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: budget, MaxConnBytes: 8 << 20, ProgressTimeout: 400 * time.Millisecond, Wait: 20 * time.Millisecond})
	sc := configFor(tr)
	sc.MaxRecvMsgSize = maxRecv
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	stalledBefore := intakeRefused(t, "grpc", "stalled")
	for range 16 {
		stall(t, e, 1, maxRecv)
	}
	testkit.WaitFor(t, "the stalled calls to take the budget", func() bool { return lim.Bytes() == budget })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r rawBytes = traceBody(t, 5, 2)
	call := func() error {
		return e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{})
	}
	if st := status.Convert(call()); st.Code() != codes.ResourceExhausted || retryDelay(st) != 20*time.Millisecond {
		t.Fatalf("call while the budget is taken: %v; want RESOURCE_EXHAUSTED with RetryInfo 20ms", st)
	}
	testkit.WaitFor(t, "the 16 stalled connections to be closed", func() bool {
		return intakeRefused(t, "grpc", "stalled")-stalledBefore == 16
	})
	testkit.WaitFor(t, "the budget to come back", func() bool { return lim.Bytes() == 0 })
	if err := call(); err != nil {
		t.Fatalf("call after the stalled connections were closed: %v", err)
	}
}

// intakeRefused reads otlpgate_intake_refused_total{intake, resource} from the default
// registry, as a scrape would; 0 before the first refusal.
func intakeRefused(t *testing.T, intake, resource string) float64 {
	t.Helper()
	return testkit.Counter(t, "otlpgate_intake_refused_total", "intake", intake, "resource", resource)
}
