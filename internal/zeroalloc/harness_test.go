//go:build !race

package zeroalloc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Every allocation of this test binary is recorded with its stack, from its package
// initialisers on: a sampled profile cannot prove a count of zero.
var _ = func() int { runtime.MemProfileRate = 1; return 0 }()

func TestMain(m *testing.M) {
	codec.RegisterCompressors() // before any server or client, as cmd/ does
	// fasthttp's client cleans idle connections on a goroutine that sleeps until the idle
	// limit, and its default dialer keeps one process-wide goroutine that forgets resolved
	// addresses; its servers share a clock goroutine and stop their worker pool's cleaner one
	// idle period after shutdown. None of them holds a payload. gnet's worker pool (ants), which
	// the gateway links in with the UDS intake, starts its cleaners at package initialisation.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// waitFor bounds every wait: a test that reaches it has failed.
const waitFor = 30 * time.Second

// ---- requests -----------------------------------------------------------------------------

// spansPer is the spans of one request; span ids run from 1 over every request of a test, so
// request i holds ids i*spansPer+1 .. (i+1)*spansPer.
const spansPer = 25

// bodies builds the requests of a test. It fills one message in place for every request, since
// thousands of messages built afresh cost seconds in a binary that records every allocation.
type bodies struct {
	req *coltracev1.ExportTraceServiceRequest
	buf []byte
}

func newBodies() *bodies {
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{strAttr("service.name", "zeroalloc")}},
		ScopeSpans: []*tracev1.ScopeSpans{{
			Scope: &commonv1.InstrumentationScope{Name: "zeroalloc", Version: "1"},
		}},
	}}}
	ss := req.ResourceSpans[0].ScopeSpans[0]
	for j := range spansPer {
		ss.Spans = append(ss.Spans, &tracev1.Span{
			TraceId: make([]byte, 16),
			SpanId:  make([]byte, 8),
			Name:    "GET /checkout/" + strconv.Itoa(j),
			Kind:    tracev1.Span_SPAN_KIND_SERVER,
			Attributes: []*commonv1.KeyValue{
				{Key: "http.status_code", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 200}}},
				{Key: "request.seq", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{}}},
				strAttr("http.method", "GET"),
				strAttr("user.region", "eu-west-"+strconv.Itoa(j%3)),
			},
		})
	}
	return &bodies{req: req}
}

// proto is request i in protobuf: one resource, one scope, spansPer spans of four attributes,
// about 3.5 KiB.
func (g *bodies) proto(i int) []byte {
	for j, sp := range g.req.ResourceSpans[0].ScopeSpans[0].Spans {
		id := uint64(i*spansPer + j + 1)
		putTraceID(sp.TraceId, id)
		binary.BigEndian.PutUint64(sp.SpanId, id)
		sp.StartTimeUnixNano, sp.EndTimeUnixNano = startNano+id, endNano+id
		sp.Attributes[1].Value.Value.(*commonv1.AnyValue_IntValue).IntValue = int64(id)
	}
	b, err := g.req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// json is request i in OTLP/JSON (hex ids, int64 as strings): the same spans as proto(i).
func (g *bodies) json(i int) []byte {
	b := append(g.buf[:0], `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"zeroalloc"}}]},`+
		`"scopeSpans":[{"scope":{"name":"zeroalloc","version":"1"},"spans":[`...)
	var tid [16]byte
	for j := range spansPer {
		id := uint64(i*spansPer + j + 1)
		if j > 0 {
			b = append(b, ',')
		}
		putTraceID(tid[:], id)
		b = append(b, `{"traceId":"`...)
		b = hex.AppendEncode(b, tid[:])
		b = append(b, `","spanId":"`...)
		b = hex.AppendEncode(b, binary.BigEndian.AppendUint64(tid[:0], id))
		b = append(b, `","name":"GET /checkout/`...)
		b = strconv.AppendInt(b, int64(j), 10)
		b = append(b, `","kind":2,"startTimeUnixNano":"`...)
		b = strconv.AppendUint(b, startNano+id, 10)
		b = append(b, `","endTimeUnixNano":"`...)
		b = strconv.AppendUint(b, endNano+id, 10)
		b = append(b, `","attributes":[{"key":"http.status_code","value":{"intValue":"200"}},{"key":"request.seq","value":{"intValue":"`...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, `"}},{"key":"http.method","value":{"stringValue":"GET"}},{"key":"user.region","value":{"stringValue":"eu-west-`...)
		b = strconv.AppendInt(b, int64(j%3), 10)
		b = append(b, `"}}]}`...)
	}
	b = append(b, `]}]}]}`...)
	g.buf = b
	return bytes.Clone(b)
}

const startNano, endNano = 1_700_000_000_000_000_000, 1_700_000_000_000_500_000

func strAttr(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// putTraceID writes the trace id of span id into t: four spans per trace.
func putTraceID(t []byte, id uint64) {
	binary.BigEndian.PutUint64(t, 0x5b8efff798038103)
	binary.BigEndian.PutUint64(t[8:], id/4)
}

// ---- sink ---------------------------------------------------------------------------------

// rawCodec carries messages as their bytes (*[]byte) for the sink and the load client, so
// that neither decodes, and neither uses otlpgate's own codec.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b := v.(*[]byte)
	*b = (*b)[:0]
	for _, buf := range data {
		*b = append(*b, buf.ReadOnlyData()...)
	}
	return nil
}

// sink is the upstream: a gRPC server that answers every OTEP stream request with Success and
// every v1 Export call with an empty response, and keeps a copy of each body for the check
// after the run. It is not testkit.GRPCSink: its arena is allocated up front, so that the sink
// adds no allocation per request to the process being measured.
type sink struct {
	gs   *grpc.Server
	addr string
	done chan struct{}

	// streams counts the OTEP streams opened to the sink. The tests read it between rounds,
	// inside the measurement, where a scrape of otlpgate's metrics would count the
	// collectors' allocations (made per scrape, not per request) as otlpgate's.
	streams atomic.Int64

	mu     sync.Mutex
	arena  []byte // the bodies, back to back
	bodies []sunk
}

type sunk struct {
	off, n int
	otep   bool // an OTEP request (id, then resource entries at field 2); else a v1 body
}

func startSink(t *testing.T) *sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{addr: ln.Addr().String(), done: make(chan struct{}),
		arena: make([]byte, 0, 64<<20), bodies: make([]sunk, 0, 1<<16)}
	s.gs = grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(s.handle),
		grpc.MaxRecvMsgSize(64<<20))
	go func() {
		defer close(s.done)
		s.gs.Serve(ln)
	}()
	t.Cleanup(func() {
		s.gs.Stop()
		<-s.done
	})
	return s
}

var otepStreamPrefix = "/" + otepv1.StreamExporter_ServiceDesc.ServiceName + "/"

func (s *sink) handle(_ any, st grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(st)
	stream := strings.HasPrefix(method, otepStreamPrefix)
	if stream {
		s.streams.Add(1)
	}
	var in, out []byte
	for {
		if err := st.RecvMsg(&in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.record(in, stream)
		out = out[:0]
		if stream {
			// ExportResponse{id, Success}: Success is 0, the default, so the id says it all.
			out = protowire.AppendTag(out, 1, protowire.VarintType)
			out = protowire.AppendVarint(out, requestID(in))
		}
		if err := st.SendMsg(&out); err != nil {
			return err
		}
		if !stream {
			return nil
		}
	}
}

func (s *sink) record(b []byte, otep bool) {
	s.mu.Lock()
	s.bodies = append(s.bodies, sunk{off: len(s.arena), n: len(b), otep: otep})
	s.arena = append(s.arena, b...)
	s.mu.Unlock()
}

// requestID is field 1 of an OTEP request, 0 when it has none.
func requestID(b []byte) uint64 {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return v
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0
		}
		b = b[n:]
	}
	return 0
}

// spanIDs walks every body the sink received and counts the deliveries of each span id. It
// walks the wire format rather than decoding messages: decoding thousands of them costs
// seconds in a binary that records every allocation.
func (s *sink) spanIDs(t *testing.T) map[uint64]int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[uint64]int{}
	for _, b := range s.bodies {
		top := protowire.Number(1) // v1: ExportTraceServiceRequest.resource_spans
		if b.otep {
			top = 2 // TraceExportRequest.resourceSpans
		}
		ok := eachBytes(s.arena[b.off:b.off+b.n], top, func(rs []byte) bool {
			return eachBytes(rs, 2, func(ss []byte) bool { // ResourceSpans.scope_spans
				return eachBytes(ss, 2, func(sp []byte) bool { // ScopeSpans.spans
					return eachBytes(sp, 2, func(id []byte) bool { // Span.span_id
						if len(id) != 8 {
							return false
						}
						seen[binary.BigEndian.Uint64(id)]++
						return true
					})
				})
			})
		})
		if !ok {
			t.Fatalf("the sink got a malformed request (otep %v): %x", b.otep, s.arena[b.off:b.off+b.n])
		}
	}
	return seen
}

// eachBytes calls fn with every length-delimited field num of msg; false when msg does not
// parse or fn said so.
func eachBytes(msg []byte, num protowire.Number, fn func([]byte) bool) bool {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return false
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 || !fn(v) {
				return false
			}
			msg = msg[l:]
			continue
		}
		if l = protowire.ConsumeFieldValue(n, typ, msg); l < 0 {
			return false
		}
		msg = msg[l:]
	}
	return true
}

// ---- otlpgate -----------------------------------------------------------------------------

// gate is a complete otlpgate in process, built as cmd/otlpgate builds it, with its defaults:
// both intakes on 127.0.0.1, the intake limiter, the pipeline, one destination.
type gate struct {
	p        *pipeline.Pipeline
	grpcAddr string
	httpAddr string
}

func startGate(t *testing.T, dc client.Config, tenants bool) *gate {
	t.Helper()
	cfg := defaultGateConfig(dc)
	if tenants {
		cfg.Tenants.Headers = []string{"x-scope-orgid"}
	}
	return startGateConfig(t, cfg)
}

// defaultGateConfig is otlpgate's defaults with the gRPC and HTTP intakes on 127.0.0.1, no
// other listener, and the one destination dc.
func defaultGateConfig(dc client.Config) gateway.Config {
	cfg := gateway.DefaultConfig()
	cfg.GRPC.Listen, cfg.HTTP.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Kafka.Listen, cfg.UDS.Listen, cfg.Admin.Listen = "", "", ""
	cfg.Destinations = []client.Config{dc}
	cfg.ShutdownTimeout = waitFor
	return cfg
}

// startGateConfig starts otlpgate with cfg.
func startGateConfig(t *testing.T, cfg gateway.Config) *gate {
	t.Helper()
	// Warnings and errors only (a broken stream, a re-send), shown when the test fails: a
	// healthy run logs none of them, so the measured rounds see no logging.
	logs := &testkit.LockedBuffer{}
	gw, err := gateway.New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("otlpgate's warnings and errors:\n%s", logs.Tail(8192))
		}
	})
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gw.Shutdown(context.Background()); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	return &gate{p: gw.Pipeline(), grpcAddr: gw.GRPCAddr().String(), httpAddr: gw.HTTPAddr().String()}
}

// drained waits until every admitted byte was delivered: the sink answered every request.
func (g *gate) drained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for g.p.QueuedBytes() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still queued after %v", g.p.QueuedBytes(), waitFor)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ---- load ---------------------------------------------------------------------------------

// sender sends request i and reports whether otlpgate accepted it; one per load goroutine.
type sender func(i int) error

// drive sends requests first..first+n-1 from workers goroutines, each with one request in
// flight, and fails the test on the first request otlpgate did not accept.
func drive(t *testing.T, first, n int, senders []sender) {
	t.Helper()
	var next atomic.Int64
	next.Store(int64(first))
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for _, send := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= first+n {
					return
				}
				if err := send(i); err != nil {
					err = fmt.Errorf("request %d: %w", i, err)
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
}

// grpcSenders are workers calling the v1 trace Export method of addr over one connection;
// with orgs, worker w sends as tenant orgs[w%len(orgs)] (X-Scope-OrgID).
func grpcSenders(t *testing.T, addr string, workers int, bodies [][]byte, orgs ...string) []sender {
	t.Helper()
	return grpcSendersWith(t, addr, workers, bodies, nil, orgs...)
}

// grpcSendersWith is grpcSenders with opts on every call.
func grpcSendersWith(t *testing.T, addr string, workers int, bodies [][]byte, opts []grpc.CallOption, orgs ...string) []sender {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(append([]grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}, opts...)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	out := make([]sender, workers)
	for w := range out {
		ctx := context.Background()
		if len(orgs) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", orgs[w%len(orgs)])
		}
		var reply []byte
		out[w] = func(i int) error {
			return conn.Invoke(ctx, coltracev1.TraceService_Export_FullMethodName, &bodies[i], &reply)
		}
	}
	return out
}

// httpSenders are workers POSTing to /v1/traces of addr with the given content type, over
// keep-alive connections.
func httpSenders(t *testing.T, addr, contentType string, workers int, bodies [][]byte) []sender {
	t.Helper()
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: workers}
	t.Cleanup(hc.CloseIdleConnections)
	out := make([]sender, workers)
	for w := range out {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("http://" + addr + "/v1/traces")
		req.Header.SetContentType(contentType)
		out[w] = func(i int) error {
			req.SetBodyRaw(bodies[i])
			if err := hc.DoTimeout(req, resp, waitFor); err != nil {
				return err
			}
			if resp.StatusCode() != fasthttp.StatusOK {
				return fmt.Errorf("status %d: %q", resp.StatusCode(), resp.Body())
			}
			return nil
		}
	}
	return out
}
