package codec

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/pool"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Every test here runs a real gRPC server on 127.0.0.1 with the codec forced, and a real client
// that forces it too, each with its own buffer pool.

const rawEchoMethod = "/otlpgate.test.Raw/Echo"

// traceSink is a v1 TraceService that keeps what it receives and answers with the number of
// spans it saw, so the client can check the response as well. The codec's tests keep their own
// servers: internal/testkit imports codec, so package codec cannot import it.
type traceSink struct {
	coltracev1.UnimplementedTraceServiceServer
	mu  sync.Mutex
	got []*coltracev1.ExportTraceServiceRequest
}

func (s *traceSink) Export(_ context.Context, req *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	return &coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
		RejectedSpans: int64(countSpans(req)),
		ErrorMessage:  "counted",
	}}, nil
}

// reset forgets what was received, for benchmarks that send many requests.
func (s *traceSink) reset() {
	s.mu.Lock()
	s.got = s.got[:0]
	s.mu.Unlock()
}

func (s *traceSink) received() []*coltracev1.ExportTraceServiceRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// otepSink is an OTEP UnaryExporter that answers every trace request by id.
type otepSink struct {
	otepv1.UnimplementedUnaryExporterServer
	mu  sync.Mutex
	got []*otepv1.TraceExportRequest
}

func (s *otepSink) ExportTraces(_ context.Context, req *otepv1.TraceExportRequest) (*otepv1.ExportResponse, error) {
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	return &otepv1.ExportResponse{Id: req.Id, ResultCode: otepv1.ResultCode_FailedRetryable}, nil
}

// rawEcho serves every method nobody registered, proxy style: it receives the request as a Raw
// and sends its bytes back in a fresh Payload. It keeps one reference to each reply payload so
// the test can check that the server's transport gave its own back.
type rawEcho struct {
	mu       sync.Mutex
	got      [][]byte
	byRef    []bool // the request was held by reference (one receive buffer), not copied
	replies  []*pool.Payload
	sendErrs []error
}

func (s *rawEcho) handle(_ any, stream grpc.ServerStream) error {
	var req Raw
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	defer req.Release()
	p := pool.NewPayload(req.Len())
	*p.Buf() = append(*p.Buf(), req.Bytes()...)

	s.mu.Lock()
	s.got = append(s.got, bytes.Clone(req.Bytes()))
	s.byRef = append(s.byRef, req.Payload() == nil)
	s.replies = append(s.replies, p.Retain())
	s.mu.Unlock()

	var resp Raw
	resp.SetPayload(p)
	err := stream.SendMsg(&resp)
	resp.Release()
	s.mu.Lock()
	s.sendErrs = append(s.sendErrs, err)
	s.mu.Unlock()
	return err
}

type harness struct {
	srv    *grpc.Server
	conn   *grpc.ClientConn
	traces *traceSink
	otep   *otepSink
	raw    *rawEcho
	done   chan error
}

// start serves on 127.0.0.1 and dials it. stop (registered as cleanup, also callable early)
// waits for every handler to return, so refcounts checked after it are final.
func start(t testing.TB, serverOpts ...grpc.ServerOption) *harness {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{traces: &traceSink{}, otep: &otepSink{}, raw: &rawEcho{}, done: make(chan error, 1)}
	opts := append([]grpc.ServerOption{
		grpc.ForceServerCodecV2(New(MemPool{})),
		grpc.WaitForHandlers(true),
		grpc.UnknownServiceHandler(h.raw.handle),
	}, serverOpts...)
	h.srv = grpc.NewServer(opts...)
	coltracev1.RegisterTraceServiceServer(h.srv, h.traces)
	otepv1.RegisterUnaryExporterServer(h.srv, h.otep)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(h.srv, hs)
	go func() { h.done <- h.srv.Serve(lis) }()

	h.conn, err = grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(New(nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.srv == nil {
		return
	}
	h.conn.Close()
	h.srv.Stop()
	<-h.done
	h.srv = nil
}

// compressions is every encoding the codec must carry messages through; "" is none.
var compressions = []string{"", Gzip, Zstd, Snappy}

func callOpts(comp string) []grpc.CallOption {
	if comp == "" {
		return nil
	}
	return []grpc.CallOption{grpc.UseCompressor(comp)}
}

func countSpans(req *coltracev1.ExportTraceServiceRequest) int {
	n := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	return n
}

var shapes = []struct {
	name  string
	shape otlpgen.Shape
}{
	{"tiny", otlpgen.Shape{Spans: 2, Attrs: 2}},
	{"small", otlpgen.Small},
	{"large", otlpgen.Large},
}

func TestTypedRoundTrip(t *testing.T) {
	h := start(t)
	client := coltracev1.NewTraceServiceClient(h.conn)
	gen := otlpgen.New(1)
	var sent []*coltracev1.ExportTraceServiceRequest
	for _, comp := range compressions {
		for _, sh := range shapes {
			req := gen.Spans(sh.shape)
			resp, err := client.Export(t.Context(), req, callOpts(comp)...)
			if err != nil {
				t.Fatalf("%s/%s: %v", comp, sh.name, err)
			}
			sent = append(sent, req)
			want := &coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
				RejectedSpans: int64(sh.shape.Spans), ErrorMessage: "counted"}}
			if !resp.EqualVT(want) {
				t.Fatalf("%s/%s: response %v, want %v", comp, sh.name, resp, want)
			}
		}
	}
	got := h.traces.received()
	if len(got) != len(sent) {
		t.Fatalf("server received %d requests, want %d", len(got), len(sent))
	}
	for i := range sent {
		if !got[i].EqualVT(sent[i]) {
			t.Fatalf("request %d arrived changed", i)
		}
	}
}

func TestOTEPRoundTrip(t *testing.T) {
	h := start(t)
	client := otepv1.NewUnaryExporterClient(h.conn)
	gen := otlpgen.New(2)
	for i, comp := range compressions {
		req := &otepv1.TraceExportRequest{Id: uint64(1000 + i), ResourceSpans: gen.Spans(otlpgen.Small).ResourceSpans}
		resp, err := client.ExportTraces(t.Context(), req, callOpts(comp)...)
		if err != nil {
			t.Fatalf("%q: %v", comp, err)
		}
		if resp.Id != req.Id || resp.ResultCode != otepv1.ResultCode_FailedRetryable {
			t.Fatalf("%q: response %v", comp, resp)
		}
		h.otep.mu.Lock()
		got := h.otep.got[len(h.otep.got)-1]
		h.otep.mu.Unlock()
		if !got.EqualVT(req) {
			t.Fatalf("%q: request arrived changed", comp)
		}
	}
}

// A client sends a payload's bytes as a Raw; the typed server must decode exactly the message
// they encode. The payload must be back to the client's references once the call returns: the
// codec's reference is given back by the transport, never leaked, never released twice.
func TestRawPayloadToTypedServer(t *testing.T) {
	h := start(t)
	gen := otlpgen.New(3)
	for _, comp := range compressions {
		for _, sh := range shapes {
			req := gen.Spans(sh.shape)
			enc, err := req.MarshalVT()
			if err != nil {
				t.Fatal(err)
			}
			p := pool.NewPayload(len(enc))
			*p.Buf() = append(*p.Buf(), enc...)

			var r Raw
			r.SetPayload(p.Retain())
			if p.Refs() != 2 {
				t.Fatalf("refs before the call: %d, want 2", p.Refs())
			}
			var resp coltracev1.ExportTraceServiceResponse
			if err := h.conn.Invoke(t.Context(), coltracev1.TraceService_Export_FullMethodName, &r, &resp, callOpts(comp)...); err != nil {
				t.Fatalf("%s/%s: %v", comp, sh.name, err)
			}
			if p.Refs() != 2 {
				t.Fatalf("%s/%s: refs after the call: %d, want 2 (the Raw's and ours)", comp, sh.name, p.Refs())
			}
			r.Release()
			if p.Refs() != 1 {
				t.Fatalf("%s/%s: refs after Raw.Release: %d, want 1", comp, sh.name, p.Refs())
			}
			if !bytes.Equal(p.Bytes(), enc) {
				t.Fatalf("%s/%s: payload bytes changed by sending", comp, sh.name)
			}
			p.Release()

			got := h.traces.received()
			if last := got[len(got)-1]; !last.EqualVT(req) {
				t.Fatalf("%s/%s: server decoded a different message", comp, sh.name)
			}
			if resp.PartialSuccess.GetRejectedSpans() != int64(sh.shape.Spans) {
				t.Fatalf("%s/%s: response %v", comp, sh.name, &resp)
			}
		}
	}
}

func TestRawBytesToTypedServer(t *testing.T) {
	h := start(t)
	gen := otlpgen.New(4)
	for _, sh := range shapes {
		req := gen.Spans(sh.shape)
		enc, _ := req.MarshalVT()
		var r Raw
		r.SetBytes(enc)
		var resp coltracev1.ExportTraceServiceResponse
		if err := h.conn.Invoke(t.Context(), coltracev1.TraceService_Export_FullMethodName, &r, &resp); err != nil {
			t.Fatalf("%s: %v", sh.name, err)
		}
		r.Release()
		got := h.traces.received()
		if last := got[len(got)-1]; !last.EqualVT(req) {
			t.Fatalf("%s: server decoded a different message", sh.name)
		}
	}
}

// The proxy path end to end: the server receives a Raw and answers with a Raw payload; the
// client sends typed and receives raw, then the other way round. Bytes must match exactly,
// and each reply payload must be down to the server's test reference once the server stopped.
func TestRawServer(t *testing.T) {
	h := start(t)
	gen := otlpgen.New(5)
	type expect struct {
		enc   []byte
		byRef *bool // how the server must hold it, where the transport makes that certain
	}
	yes, no := true, false
	var want []expect
	for _, comp := range compressions {
		for _, sh := range shapes {
			req := gen.Spans(sh.shape)
			enc, _ := req.MarshalVT()
			e := expect{enc: enc}
			// Uncompressed, a tiny message arrives within the frame that carries it and is kept
			// by reference; one larger than a 16 KiB frame arrives in pieces and is copied.
			switch {
			case comp == "" && len(enc) < 1<<10:
				e.byRef = &yes
			case comp == "" && len(enc) > 16<<10:
				e.byRef = &no
			}

			// typed request, raw reply
			var reply Raw
			if err := h.conn.Invoke(t.Context(), rawEchoMethod, req, &reply, callOpts(comp)...); err != nil {
				t.Fatalf("%s/%s: %v", comp, sh.name, err)
			}
			if !bytes.Equal(reply.Bytes(), enc) {
				t.Fatalf("%s/%s: raw reply differs from the request's encoding", comp, sh.name)
			}
			reply.Release()
			if reply.Len() != 0 || reply.Payload() != nil {
				t.Fatalf("%s/%s: released Raw not empty", comp, sh.name)
			}
			want = append(want, e)

			// raw request, typed reply
			var r Raw
			r.SetBytes(enc)
			var back coltracev1.ExportTraceServiceRequest
			if err := h.conn.Invoke(t.Context(), rawEchoMethod, &r, &back, callOpts(comp)...); err != nil {
				t.Fatalf("%s/%s: %v", comp, sh.name, err)
			}
			if !back.EqualVT(req) {
				t.Fatalf("%s/%s: typed reply differs from the request", comp, sh.name)
			}
			want = append(want, e)
		}
	}
	h.stop()

	h.raw.mu.Lock()
	defer h.raw.mu.Unlock()
	if len(h.raw.got) != len(want) {
		t.Fatalf("server handled %d requests, want %d", len(h.raw.got), len(want))
	}
	for i, e := range want {
		if !bytes.Equal(h.raw.got[i], e.enc) {
			t.Errorf("request %d: server received different bytes", i)
		}
		if h.raw.sendErrs[i] != nil {
			t.Errorf("request %d: server SendMsg: %v", i, h.raw.sendErrs[i])
		}
		if e.byRef != nil && h.raw.byRef[i] != *e.byRef {
			t.Errorf("request %d (%d bytes): held by reference %v, want %v", i, len(e.enc), h.raw.byRef[i], *e.byRef)
		}
		p := h.raw.replies[i]
		if p.Refs() != 1 {
			t.Errorf("reply %d: payload refs %d after the server stopped, want 1 (the test's)", i, p.Refs())
		}
		p.Release()
	}
}

// Health checks use protoc-gen-go messages without vtprotobuf methods: the fallback path.
func TestHealthThroughFallback(t *testing.T) {
	h := start(t)
	resp, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health status %v, want SERVING", resp.Status)
	}
}

// A small, highly compressed message that expands past the server's receive limit must be
// refused by gRPC before the handler sees it, whatever the compressor.
func TestDecompressedSizeCapped(t *testing.T) {
	h := start(t, grpc.MaxRecvMsgSize(64<<10))
	big := make([]byte, 1<<20) // zeros: compresses to almost nothing
	for _, comp := range []string{Gzip, Zstd, Snappy} {
		var r Raw
		r.SetBytes(big)
		var reply Raw
		err := h.conn.Invoke(t.Context(), rawEchoMethod, &r, &reply, callOpts(comp)...)
		reply.Release()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s: %v, want ResourceExhausted", comp, err)
		}
	}
	h.raw.mu.Lock()
	defer h.raw.mu.Unlock()
	if len(h.raw.got) != 0 {
		t.Fatalf("handler received %d oversized messages", len(h.raw.got))
	}
}
