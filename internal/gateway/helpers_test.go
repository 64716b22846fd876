package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/otlpgate/otlpgate/client"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's worker pool (ants), linked in with the UDS intake, starts its cleaners when the
		// package initialises.
		goleak.IgnoreCurrent(),
		// fasthttp's process-wide helpers, started once and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// waitFor bounds every wait: a test that reaches it has failed.
const waitFor = 30 * time.Second

// upstream is a v1 OTLP/gRPC trace server that records the span ids it acknowledged. While
// held, it answers nothing until released (a stalled upstream).
type upstream struct {
	coltracev1.UnimplementedTraceServiceServer
	gs   *grpc.Server
	addr string
	done chan struct{}

	delay time.Duration // taken over each call: a slow upstream
	// answerLate records a call's spans before the hold, not after: an upstream that took
	// them and is late to answer, so that whatever the client sends again arrives twice.
	answerLate bool

	mu      sync.Mutex
	ids     map[uint64]int
	held    chan struct{} // nil: answer at once
	waiting int           // calls waiting while held
	// heldFrom counts, by the client connection's address, the calls waiting in the hold now:
	// a test can wait until a connection's held calls have ended before it releases the
	// rest, so that a call its client gave up on is not recorded as if answered.
	heldFrom map[string]int
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().String(), done: make(chan struct{}), ids: map[uint64]int{}}
	u.gs = grpc.NewServer()
	coltracev1.RegisterTraceServiceServer(u.gs, u)
	go func() {
		defer close(u.done)
		u.gs.Serve(ln)
	}()
	t.Cleanup(func() {
		u.release()
		u.gs.Stop()
		<-u.done
	})
	return u
}

// hold makes the upstream stop answering until release.
func (u *upstream) hold() {
	u.mu.Lock()
	if u.held == nil {
		u.held = make(chan struct{})
	}
	u.mu.Unlock()
}

func (u *upstream) release() {
	u.mu.Lock()
	if u.held != nil {
		close(u.held)
		u.held = nil
	}
	u.mu.Unlock()
}

func (u *upstream) Export(ctx context.Context, req *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	u.mu.Lock()
	if u.answerLate {
		u.recordLocked(req)
	}
	held := u.held
	var from string
	if held != nil {
		u.waiting++
		if p, ok := peer.FromContext(ctx); ok {
			from = p.Addr.String()
		}
		if u.heldFrom == nil {
			u.heldFrom = map[string]int{}
		}
		u.heldFrom[from]++
	}
	u.mu.Unlock()
	if held != nil {
		var err error
		select {
		case <-held:
		case <-ctx.Done():
			err = ctx.Err()
		}
		u.mu.Lock()
		u.heldFrom[from]--
		u.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	if u.delay > 0 {
		time.Sleep(u.delay)
	}
	u.mu.Lock()
	if !u.answerLate {
		u.recordLocked(req)
	}
	u.mu.Unlock()
	return &coltracev1.ExportTraceServiceResponse{}, nil
}

func (u *upstream) recordLocked(req *coltracev1.ExportTraceServiceRequest) {
	for _, id := range spanIDs(req.ResourceSpans) {
		u.ids[id]++
	}
}

// heldNow returns the client connections with calls waiting in the hold now.
func (u *upstream) heldNow() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var from []string
	for addr, n := range u.heldFrom {
		if n > 0 {
			from = append(from, addr)
		}
	}
	return from
}

// heldCalls is how many calls from the client connection at addr wait in the hold now.
func (u *upstream) heldCalls(addr string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.heldFrom[addr]
}

// count is how often span id arrived.
func (u *upstream) count(id uint64) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[id]
}

func spanIDs(rs []*tracev1.ResourceSpans) []uint64 {
	var ids []uint64
	for _, r := range rs {
		for _, ss := range r.ScopeSpans {
			for _, sp := range ss.Spans {
				ids = append(ids, binary.BigEndian.Uint64(sp.SpanId))
			}
		}
	}
	return ids
}

// traceBody is a v1 trace request body holding one span per id, padded with an attribute of
// pad bytes.
func traceBody(t *testing.T, pad int, ids ...uint64) []byte {
	t.Helper()
	ss := &tracev1.ScopeSpans{}
	for _, id := range ids {
		ss.Spans = append(ss.Spans, &tracev1.Span{TraceId: bytes.Repeat([]byte{7}, 16), SpanId: binary.BigEndian.AppendUint64(nil, id),
			Name: "gateway", StartTimeUnixNano: 1, EndTimeUnixNano: 2, Attributes: padAttr(pad)})
	}
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{ss}}}}
	b, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// padAttr is one string attribute of n bytes, or none.
func padAttr(n int) []*commonv1.KeyValue {
	if n == 0 {
		return nil
	}
	v := &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: string(bytes.Repeat([]byte{'p'}, n))}}
	return []*commonv1.KeyValue{{Key: "pad", Value: v}}
}

// destTo is a v1 unary destination to addr with test-sized timers.
func destTo(name, addr string) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint = name, addr
	c.Protocol, c.Mode = client.ProtocolV1, client.ModeUnary
	c.RetryInitial, c.RetryMax = 10*time.Millisecond, 100*time.Millisecond
	return c
}

// testConfig is a gateway with its gRPC, OTLP/HTTP and admin listeners on free loopback
// ports, the others off.
func testConfig() Config {
	c := DefaultConfig()
	c.GRPC.Listen, c.HTTP.Listen, c.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	c.Kafka.Listen, c.UDS.Listen = "", ""
	c.Admin.Status.Interval = 100 * time.Millisecond
	c.Admin.Status.DownAfter = time.Second
	c.ShutdownTimeout = 10 * time.Second
	return c
}

// startGateway builds and starts cfg; the test's cleanup shuts it down if the test did not.
func startGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	g, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return g
}

// post sends body to the gateway's OTLP/HTTP intake and returns the status.
func post(t *testing.T, g *Gateway, body []byte) int {
	t.Helper()
	resp, err := http.Post("http://"+g.HTTPAddr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// get returns the status and body of an admin endpoint.
func get(t *testing.T, g *Gateway, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + g.AdminAddr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually waits (bounded) for cond, failing with what() when it does not come.
func eventually(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", waitFor, what())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
