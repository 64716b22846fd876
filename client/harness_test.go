package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func TestMain(m *testing.M) {
	codec.RegisterCompressors() // before any server or client, as cmd/ does
	// fasthttp's HostClient cleans idle connections on a goroutine that sleeps until the idle
	// limit and then ends; it holds no payload. Its servers (server/http and the OTLP/HTTP test
	// upstreams) share one process-wide clock goroutine, and each stops its worker pool's
	// cleaner one idle period (10s) after shutdown.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// waitFor bounds every wait of the tests: long enough for a loaded 2-core machine under -race,
// and a test that reaches it has failed.
const waitFor = 30 * time.Second

// ---- batches ----------------------------------------------------------------------------

// traceBody builds a v1 trace request body of entries resource entries, each with one span
// named tag and a pad-byte attribute, so that a body names the batch it belongs to.
func traceBody(tag string, entries, pad int) []byte {
	req := &coltracev1.ExportTraceServiceRequest{}
	for i := range entries {
		req.ResourceSpans = append(req.ResourceSpans, &tracev1.ResourceSpans{
			Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{
				Key: "entry", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: int64(i)}},
			}}},
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
				Name:    tag,
				TraceId: bytes.Repeat([]byte{1}, 16),
				SpanId:  bytes.Repeat([]byte{2}, 8),
				Attributes: []*commonv1.KeyValue{{
					Key: "pad", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: strings.Repeat("x", pad)}},
				}},
			}}}},
		})
	}
	b, err := req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// tagOf returns the span name of the first entry of a v1 trace body, "" when it has none.
func tagOf(body []byte) string {
	var req coltracev1.ExportTraceServiceRequest
	if err := req.UnmarshalVT(body); err != nil || len(req.ResourceSpans) == 0 {
		return ""
	}
	ss := req.ResourceSpans[0].ScopeSpans
	if len(ss) == 0 || len(ss[0].Spans) == 0 {
		return ""
	}
	return ss[0].Spans[0].Name
}

// feeder turns request bodies into batches for the destinations under test: a pipeline that
// seals every request as its own batch (one item per batch) and acknowledges only once every
// destination finished it, so that Wait tells what the destinations did with each batch.
type feeder struct {
	t       *testing.T
	p       *pipeline.Pipeline
	mu      sync.Mutex
	batches []*pipeline.Batch
	bodies  map[string][]byte // tag -> body
}

func newFeeder(t *testing.T, dests ...pipeline.Destination) *feeder {
	t.Helper()
	cfg := pipeline.DefaultConfig()
	cfg.Ack = pipeline.AckUpstream
	cfg.BatchMaxItems = 1
	cfg.BatchMaxAge = time.Hour
	p, err := pipeline.New(cfg, dests)
	if err != nil {
		t.Fatal(err)
	}
	f := &feeder{t: t, p: p, bodies: map[string][]byte{}}
	t.Cleanup(func() {
		f.p.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, b := range f.batches {
			if b != nil {
				b.Unref()
			}
		}
	})
	return f
}

// send admits n batches tagged b<first>..b<first+n-1>, each of entries entries of pad bytes.
// Each becomes one batch, enqueued to every destination in order before send returns.
func (f *feeder) send(first, n, entries, pad int) {
	f.t.Helper()
	for i := first; i < first+n; i++ {
		tag := "b" + strconv.Itoa(i)
		body := traceBody(tag, entries, pad)
		b, err := f.p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: entries})
		if err != nil {
			f.t.Fatalf("admit %s: %v", tag, err)
		}
		f.mu.Lock()
		f.batches = append(f.batches, b)
		f.bodies[tag] = body
		f.mu.Unlock()
	}
}

// wait returns, for batch i (0-based, in send order), whether every destination delivered it.
func (f *feeder) wait(i int) bool {
	f.t.Helper()
	f.mu.Lock()
	b := f.batches[i]
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ok, err := b.Wait(ctx)
	if err != nil {
		f.t.Fatalf("batch %d never finished: %v", i, err)
	}
	return ok
}

// waitAll returns the outcome of every batch sent so far, in send order.
func (f *feeder) waitAll() []bool {
	f.t.Helper()
	f.mu.Lock()
	n := len(f.batches)
	f.mu.Unlock()
	out := make([]bool, n)
	for i := range n {
		out[i] = f.wait(i)
	}
	return out
}

func (f *feeder) body(tag string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[tag]
}

// ---- upstream ---------------------------------------------------------------------------

// received is one request as the upstream saw it.
type received struct {
	stream int    // 1-based stream number, 0 for a unary call
	id     uint64 // OTEP id, 0 for v1
	tag    string
	body   []byte // the v1 body (OTEP requests re-tagged back)
	method string
}

// upstream is a gRPC server written for these tests. It serves every method through one raw
// handler: OTEP streams, OTEP unary calls and v1 Export calls, answering as the test's
// policies say. It is not testkit.GRPCSink, which answers Success to everything: the client's
// tests script each answer (per stream and request, late or never) and check how the client
// speaks the protocol (windows, half-closes, compression).
type upstream struct {
	t    testing.TB
	addr string
	srv  *grpc.Server
	ln   net.Listener
	done chan struct{}
	opts []grpc.ServerOption

	// onStream decides about each request read on a stream: it may answer at once through
	// s.ack, later, or never; a non-nil error ends the stream with that status (errEndStream:
	// cleanly). nil: answer Success at once.
	onStream func(s *srvStream, g received) error
	// onUnary answers an OTEP unary call (code) or a v1 call (code ignored); an error fails
	// the call with that status. nil: Success.
	onUnary func(g received) (otepv1.ResultCode, error)
	// unaryDelayMs, when set, gives the retry_delay_ms of each OTEP unary answer.
	unaryDelayMs func(g received) uint64
	// window is the client's window, to catch a stream with more requests unanswered.
	window int
	// keepOpen leaves half-closed streams open until the client cancels them.
	keepOpen bool
	// countOnly keeps no request bodies (benchmarks).
	countOnly bool
	// srvCtxHook, when set, sees the metadata of every unary call.
	srvCtxHook func(metadata.MD)
	// v1Rejected and v1Message, when set, are the partial success of every v1 response
	// (v1Message "some" when only v1Rejected is set).
	v1Rejected int64
	v1Message  string
	// answerPad, when set, adds an unknown field of that many bytes to every answer.
	answerPad int

	mu         sync.Mutex
	got        []received
	streams    []*srvStream
	halfClosed []int // streams the client half-closed, in order
	probes     int   // empty requests read: probes (poison.go)
	canceled   []int // half-closed streams the client then cancelled (keepOpen)
	inCall     int
	maxInCall  int
	violations []string
	compressed []string      // grpc-encoding of every call, in arrival order
	changed    chan struct{} // closed and replaced on every change, for waiters
}

var errEndStream = errors.New("end the stream cleanly")

// newUpstream serves on a fresh port of 127.0.0.1, in plaintext unless opts say otherwise.
func newUpstream(t testing.TB, opts ...grpc.ServerOption) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{t: t, addr: ln.Addr().String(), changed: make(chan struct{}), opts: opts}
	u.serve(ln)
	t.Cleanup(u.stop)
	return u
}

func (u *upstream) serve(ln net.Listener) {
	u.ln = ln
	u.srv = grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodecV2(codec.New(nil)),
		grpc.UnknownServiceHandler(u.handle), grpc.StatsHandler(compressionStats{u})}, u.opts...)...)
	u.done = make(chan struct{})
	go func() {
		defer close(u.done)
		u.srv.Serve(ln)
	}()
}

// stop ends every call and connection at once, like a crash of the server process.
func (u *upstream) stop() {
	u.srv.Stop()
	<-u.done
}

// restart stops the server and serves again on the same address.
func (u *upstream) restart() {
	u.t.Helper()
	u.stop()
	var ln net.Listener
	var err error
	for range 100 { // the port is ours; a busy kernel may take a moment to release it
		if ln, err = net.Listen("tcp", u.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		u.t.Fatalf("cannot listen again on %s: %v", u.addr, err)
	}
	u.serve(ln)
}

func (u *upstream) notifyLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// waitUntil blocks until cond (called under u.mu) holds; the test fails after waitFor.
func (u *upstream) waitUntil(what string, cond func() bool) {
	u.t.Helper()
	deadline := time.After(waitFor)
	for {
		u.mu.Lock()
		ok, ch := cond(), u.changed
		u.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			u.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (u *upstream) record(g received) {
	u.mu.Lock()
	u.got = append(u.got, g)
	u.notifyLocked()
	u.mu.Unlock()
}

func (u *upstream) received() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.got...)
}

// tags lists the tags received, in arrival order.
func (u *upstream) tags() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tagsLocked()
}

func (u *upstream) tagsLocked() []string {
	var out []string
	for _, g := range u.got {
		out = append(out, g.tag)
	}
	return out
}

func (u *upstream) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	switch {
	case strings.HasPrefix(method, "/otlpgate.otep.v1.StreamExporter/"):
		return u.serveStream(ss, method)
	case strings.HasPrefix(method, "/otlpgate.otep.v1.UnaryExporter/"):
		return u.serveUnary(ss, method, true)
	case strings.HasPrefix(method, "/opentelemetry.proto.collector."):
		return u.serveUnary(ss, method, false)
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// decode reads a request: OTEP requests are converted back to the v1 body.
func (u *upstream) decode(raw []byte, otep bool, stream int, method string) received {
	g := received{stream: stream, method: method}
	if u.countOnly {
		// Benchmarks: the id only, which leads the request (field 1, a varint).
		if otep && len(raw) > 1 && raw[0] == 0x08 {
			id, _ := protowire.ConsumeVarint(raw[1:])
			g.id = id
		}
		return g
	}
	if otep {
		body, id, err := fastpath.AppendV1(nil, raw)
		if err != nil {
			u.violation(fmt.Sprintf("undecodable OTEP request: %v", err))
		}
		g.id, g.body = id, body
	} else {
		g.body = bytes.Clone(raw)
	}
	g.tag = tagOf(g.body)
	return g
}

func (u *upstream) violation(v string) {
	u.mu.Lock()
	u.violations = append(u.violations, v)
	u.mu.Unlock()
}

func (u *upstream) serveUnary(ss grpc.ServerStream, method string, otep bool) error {
	var raw codec.Raw
	defer raw.Release()
	if err := ss.RecvMsg(&raw); err != nil {
		return err
	}
	g := u.decode(raw.Bytes(), otep, 0, method)
	if u.srvCtxHook != nil {
		md, _ := metadata.FromIncomingContext(ss.Context())
		u.srvCtxHook(md)
	}
	u.mu.Lock()
	u.inCall++
	u.maxInCall = max(u.maxInCall, u.inCall)
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inCall--
		u.mu.Unlock()
	}()
	u.record(g)
	code := otepv1.ResultCode_Success
	if u.onUnary != nil {
		var err error
		if code, err = u.onUnary(g); err != nil {
			return err
		}
	}
	if otep {
		var delay uint64
		if u.unaryDelayMs != nil {
			delay = u.unaryDelayMs(g)
		}
		resp := &otepv1.ExportResponse{Id: g.id, ResultCode: code, RetryDelayMs: delay}
		resp.ProtoReflect().SetUnknown(u.pad())
		return ss.SendMsg(resp)
	}
	resp := &coltracev1.ExportTraceServiceResponse{}
	if u.v1Rejected != 0 || u.v1Message != "" {
		msg := u.v1Message
		if msg == "" {
			msg = "some"
		}
		resp.PartialSuccess = &coltracev1.ExportTracePartialSuccess{RejectedSpans: u.v1Rejected, ErrorMessage: msg}
	}
	resp.ProtoReflect().SetUnknown(u.pad())
	return ss.SendMsg(resp)
}

// pad is the unknown field answerPad asks for, nil without one.
func (u *upstream) pad() []byte {
	if u.answerPad == 0 {
		return nil
	}
	b := protowire.AppendTag(nil, 999, protowire.BytesType)
	return protowire.AppendBytes(b, make([]byte, u.answerPad))
}

// srvStream is the upstream's side of one OTEP stream.
type srvStream struct {
	u       *upstream
	n       int
	ss      grpc.ServerStream
	mu      sync.Mutex // one SendMsg at a time
	unacked map[uint64]bool
	acked   chan struct{}
}

// ack answers id; it may be called from any goroutine, also after the request's handler
// moved on. Answers for a stream that ended are lost, as on a real network.
func (s *srvStream) ack(id uint64, code otepv1.ResultCode) {
	s.mu.Lock()
	delete(s.unacked, id)
	resp := &otepv1.ExportResponse{Id: id, ResultCode: code}
	resp.ProtoReflect().SetUnknown(s.u.pad())
	err := s.ss.SendMsg(resp)
	s.mu.Unlock()
	if err == nil {
		select {
		case s.acked <- struct{}{}:
		default:
		}
	}
}

func (s *srvStream) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unacked)
}

func (u *upstream) serveStream(ss grpc.ServerStream, method string) error {
	u.mu.Lock()
	s := &srvStream{u: u, n: len(u.streams) + 1, ss: ss, unacked: map[uint64]bool{}, acked: make(chan struct{}, 1)}
	u.streams = append(u.streams, s)
	u.notifyLocked()
	u.mu.Unlock()
	var raw codec.Raw
	defer raw.Release()
	for {
		raw.Release()
		if err := ss.RecvMsg(&raw); err != nil {
			if err != io.EOF {
				return err
			}
			u.mu.Lock()
			u.halfClosed = append(u.halfClosed, s.n)
			u.notifyLocked()
			u.mu.Unlock()
			if u.keepOpen {
				<-ss.Context().Done()
				u.mu.Lock()
				u.canceled = append(u.canceled, s.n)
				u.notifyLocked()
				u.mu.Unlock()
				return ss.Context().Err()
			}
			// The client half-closed: answer what is still pending (the test does), then end.
			for s.pending() > 0 {
				select {
				case <-s.acked:
				case <-ss.Context().Done():
					return ss.Context().Err()
				}
			}
			return nil
		}
		g := u.decode(raw.Bytes(), true, s.n, method)
		if len(raw.Bytes()) == 0 {
			// A probe (poison.go): no id, no entries, on a stream of its own. The test's
			// policy answers it or ends its stream, as for any request; it is not recorded.
			u.mu.Lock()
			u.probes++
			u.mu.Unlock()
			if u.onStream == nil {
				s.ack(0, otepv1.ResultCode_Success)
			} else if err := u.onStream(s, g); err != nil {
				return err
			}
			continue
		}
		s.mu.Lock()
		if u.window > 0 && len(s.unacked) >= u.window {
			u.violation(fmt.Sprintf("stream %d: request %d arrived with %d unanswered (window %d)", s.n, g.id, len(s.unacked), u.window))
		}
		s.unacked[g.id] = true
		s.mu.Unlock()
		u.record(g)
		if u.onStream == nil {
			s.ack(g.id, otepv1.ResultCode_Success)
			continue
		}
		if err := u.onStream(s, g); err != nil {
			if err == errEndStream {
				return nil
			}
			return err
		}
	}
}

func (u *upstream) checkViolations() {
	u.t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, v := range u.violations {
		u.t.Error(v)
	}
}

// throttleErr is the status of a server that asks for a pause of d.
func throttleErr(d time.Duration) error {
	st, err := status.New(codes.Unavailable, "slow down").WithDetails(throttleDetails(d))
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func throttleDetails(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

// ---- destinations -----------------------------------------------------------------------

var destSeq atomic.Int64

// testConfig is a destination for upstream u with short retry delays and no timeouts that a
// slow machine could reach by accident.
func testConfig(t testing.TB, addr string) Config {
	c := DefaultConfig()
	// Unique per run: metrics are per destination name, and -count reruns a test.
	c.Name = strings.NewReplacer("/", "_", " ", "_", ",", "_", "=", "_").Replace(t.Name()) +
		"_" + strconv.FormatInt(destSeq.Add(1), 10)
	c.Endpoint = addr
	// Most tests here exercise otlpgate's own streaming protocol; the others set theirs.
	c.Protocol, c.Mode = ProtocolOTEP, ModeStream
	c.AckTimeout = waitFor * 2
	c.RetryInitial = 5 * time.Millisecond
	c.RetryMax = 50 * time.Millisecond
	c.RetryMaxElapsed = waitFor * 2
	c.KeepaliveTime = 0
	return c
}

// startDest builds and starts a destination; the test's cleanup shuts it down.
func startDest(t *testing.T, cfg Config) *Dest {
	t.Helper()
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	t.Cleanup(func() {
		if d.closing() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		d.Shutdown(ctx)
	})
	return d
}

// shutdown stops d, waiting at most wait for its pending answers.
func shutdown(t *testing.T, d *Dest, wait time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return d.Shutdown(ctx)
}

func value(c prometheus.Collector) int {
	return int(testutil.ToFloat64(c))
}

// tagList is b<from>..b<to> inclusive.
func tagList(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, "b"+strconv.Itoa(i))
	}
	return out
}

// count returns how many times each tag occurs.
func count(tags []string) map[string]int {
	m := map[string]int{}
	for _, t := range tags {
		m[t]++
	}
	return m
}

func allTrue(ok []bool) bool {
	for _, v := range ok {
		if !v {
			return false
		}
	}
	return true
}

// compressionStats records the grpc-encoding each call arrived with.
type compressionStats struct{ u *upstream }

func (compressionStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (compressionStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (compressionStats) HandleConn(context.Context, stats.ConnStats) {}
func (c compressionStats) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && !h.Client {
		c.u.mu.Lock()
		c.u.compressed = append(c.u.compressed, h.Compression)
		c.u.mu.Unlock()
	}
}
