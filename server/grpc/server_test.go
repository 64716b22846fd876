package grpcserver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func traceBody(t testing.TB, seed uint64, spans int) []byte {
	t.Helper()
	b, err := otlpgen.New(seed).Spans(otlpgen.Shape{Spans: spans, Attrs: 2}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func otepReq(t testing.TB, id uint64, body []byte) []byte {
	t.Helper()
	b, err := fastpath.AppendOTEP(nil, id, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The 10,000 pipelined requests of the acceptance test: every id is answered exactly once,
// with Success, and every span arrives at the destination.
func TestOTEPStreamPipelined(t *testing.T) { onTransports(t, testOTEPStreamPipelined) }

func testOTEPStreamPipelined(t *testing.T, tr string) {
	e := start(t, testPipelineConfig(), configFor(tr), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := otepv1.NewStreamExporterClient(e.conn).ExportTraces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	req := otlpgen.New(3).Spans(otlpgen.Shape{Spans: 2, Attrs: 2}).ResourceSpans[0]
	sendErr := make(chan error, 1)
	go func() {
		for id := uint64(1); id <= n; id++ {
			if err := stream.Send(&otepv1.TraceExportRequest{Id: id, ResourceSpans: []*tracev1.ResourceSpans{req}}); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	seen := make([]bool, n+1)
	for range n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Id == 0 || resp.Id > n || seen[resp.Id] {
			t.Fatalf("unexpected or repeated id %d", resp.Id)
		}
		if resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("id %d: %v", resp.Id, resp.ResultCode)
		}
		seen[resp.Id] = true
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if extra, err := drainEOF(stream); err != nil || extra != 0 {
		t.Fatalf("after all answers: %d extra, %v", extra, err)
	}
	// Flush seals what is open; a batch the age flusher took out just before may still be on
	// its way to the destination, so the count is waited for (bounded).
	e.p.Flush()
	batches, items := totals(e.rec)
	for deadline := time.Now().Add(10 * time.Second); items < 2*n && time.Now().Before(deadline); batches, items = totals(e.rec) {
		time.Sleep(time.Millisecond)
	}
	if items != 2*n {
		t.Fatalf("destination got %d spans, want %d", items, 2*n)
	}
	// The batches hold the requests' entries, re-tagged to v1 and concatenated.
	entry, _ := (&coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{req}}).MarshalVT()
	var all []byte
	for _, b := range batches {
		all = append(all, b...)
	}
	if !bytes.Equal(all, bytes.Repeat(entry, n)) {
		t.Fatal("batches are not the v1 re-tagging of the requests")
	}
}

func TestGarbageAnsweredAndStreamGoesOn(t *testing.T) {
	onTransports(t, testGarbageAnsweredAndStreamGoesOn)
}

func testGarbageAnsweredAndStreamGoesOn(t *testing.T, tr string) {
	e := start(t, testPipelineConfig(), configFor(tr), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)

	garbage := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 77)
	garbage = append(garbage, 0x12, 0x7f, 0xde, 0xad) // entry claims 127 bytes, has 2
	sendRaw(t, s, garbage)
	resp, err := recvResp(t, s)
	if err != nil || resp.Id != 77 || resp.ResultCode != otepv1.ResultCode_FailedNoneRetryable {
		t.Fatalf("garbage: %v, %v; want id 77 FailedNoneRetryable", resp, err)
	}
	sendRaw(t, s, []byte{0xff, 0xff, 0xff})
	if resp, err := recvResp(t, s); err != nil || resp.ResultCode != otepv1.ResultCode_FailedNoneRetryable {
		t.Fatalf("pure garbage: %v, %v", resp, err)
	}
	sendRaw(t, s, otepReq(t, 78, traceBody(t, 1, 3)))
	if resp, err := recvResp(t, s); err != nil || resp.Id != 78 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("valid request after garbage: %v, %v", resp, err)
	}
	sendRaw(t, s, otepReq(t, 79, nil)) // empty request: Success
	if resp, err := recvResp(t, s); err != nil || resp.Id != 79 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("empty request: %v, %v", resp, err)
	}
	s.CloseSend()
	if _, err := drainEOF(s); err != nil {
		t.Fatal(err)
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 3 {
		t.Fatalf("destination got %d spans, want 3", items)
	}
}

func TestV1Unary(t *testing.T) { onTransports(t, testV1Unary) }

func testV1Unary(t *testing.T, tr string) {
	e := start(t, testPipelineConfig(), configFor(tr), nil)
	ctx := context.Background()
	body := traceBody(t, 5, 4)
	var resp coltracev1.ExportTraceServiceResponse
	invoke := func(b []byte) error {
		var r rawBytes = b
		return e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &resp)
	}
	if err := invoke(body); err != nil || resp.PartialSuccess != nil {
		t.Fatalf("valid request: %v, %v", err, resp.PartialSuccess)
	}
	if err := invoke(nil); err != nil {
		t.Fatalf("empty request: %v", err)
	}
	if err := invoke([]byte{0x0a, 0x50, 0x01}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("garbage: %v, want InvalidArgument", err)
	}
	// One good entry and one whose span is malformed inside: the good one is kept.
	good := traceBody(t, 6, 2)
	bad := protowire.AppendTag(nil, 1, protowire.BytesType)
	inner := []byte{0x12, 0x04, 0x12, 0x02, 0x0a, 0x05} // scope_spans{spans{trace_id: truncated}}
	bad = protowire.AppendBytes(bad, inner)
	resp.Reset()
	if err := invoke(append(append([]byte(nil), good...), bad...)); err != nil {
		t.Fatal(err)
	}
	if ps := resp.PartialSuccess; ps == nil || ps.ErrorMessage != "1 of 2 resource entries were malformed and dropped" {
		t.Fatalf("partial success = %v", ps)
	}
	e.p.Flush()
	batches, items := totals(e.rec)
	var all []byte
	for _, b := range batches {
		all = append(all, b...)
	}
	if want := append(append([]byte(nil), body...), good...); !bytes.Equal(all, want) || items != 6 {
		t.Fatalf("destination got %d bytes / %d spans, want the valid request and the good entry", len(all), items)
	}

	// The typed path: a standard client with the default codec.
	_, err := coltracev1.NewTraceServiceClient(e.conn).Export(ctx, &coltracev1.ExportTraceServiceRequest{})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOTEPUnary(t *testing.T) { onTransports(t, testOTEPUnary) }

func testOTEPUnary(t *testing.T, tr string) {
	e := start(t, testPipelineConfig(), configFor(tr), nil)
	c := otepv1.NewUnaryExporterClient(e.conn)
	rs := otlpgen.New(9).Spans(otlpgen.Small).ResourceSpans
	resp, err := c.ExportTraces(context.Background(), &otepv1.TraceExportRequest{Id: 1234, ResourceSpans: rs})
	if err != nil || resp.Id != 1234 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("%v, %v", resp, err)
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 100 {
		t.Fatalf("destination got %d spans, want 100", items)
	}
}

// With a destination that does not drain, the intake refuses with backpressure, never holds
// more than -queue.max-bytes, and delivers everything it accepted once the destination drains.
func TestBackpressureAndRecovery(t *testing.T) { onTransports(t, testBackpressureAndRecovery) }

func testBackpressureAndRecovery(t *testing.T, tr string) {
	pc := testPipelineConfig()
	pc.QueueMaxBytes = 64 << 10
	pc.BatchMaxBytes = 16 << 10
	sc := configFor(tr)
	sc.OverloadAfter = time.Hour // per-request FailedRetryable only, in this part
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, sc, rec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)
	body := traceBody(t, 2, 10)
	accepted, refused := 0, 0
	for id := uint64(1); id <= 200; id++ {
		sendRaw(t, s, otepReq(t, id, body))
		resp, err := recvResp(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Id != id {
			t.Fatalf("answer for %d carries id %d", id, resp.Id)
		}
		switch resp.ResultCode {
		case otepv1.ResultCode_Success:
			accepted++
		case otepv1.ResultCode_FailedRetryable:
			refused++
		default:
			t.Fatalf("id %d: %v", id, resp.ResultCode)
		}
		if q := e.p.QueuedBytes(); q > pc.QueueMaxBytes {
			t.Fatalf("queued %d > -queue.max-bytes %d", q, pc.QueueMaxBytes)
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("accepted %d, refused %d: want both", accepted, refused)
	}
	// v1 unary under the same pressure: UNAVAILABLE with a RetryInfo delay.
	var r rawBytes = body
	err := e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &coltracev1.ExportTraceServiceResponse{})
	if st := status.Convert(err); st.Code() != codes.Unavailable || retryDelay(st) <= 0 {
		t.Fatalf("v1 under pressure: %v (retry delay %v)", err, retryDelay(st))
	}
	e.rec.Release(true)
	e.p.Flush()
	sendRaw(t, s, otepReq(t, 999, body))
	if resp, err := recvResp(t, s); err != nil || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("after recovery: %v, %v", resp, err)
	}
	s.CloseSend()
	drainEOF(s)
	e.p.Flush()
	if _, items := totals(e.rec); items != (accepted+1)*10 {
		t.Fatalf("delivered %d spans, accepted %d", items, (accepted+1)*10)
	}
}

func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.RetryDelay.AsDuration()
		}
	}
	return 0
}

func TestSustainedOverloadEndsStream(t *testing.T) { onTransports(t, testSustainedOverloadEndsStream) }

func testSustainedOverloadEndsStream(t *testing.T, tr string) {
	pc := testPipelineConfig()
	pc.QueueMaxBytes = 8 << 10
	pc.BatchMaxBytes = 8 << 10
	sc := configFor(tr)
	sc.OverloadAfter = 0 // the first refusal counts as sustained
	e := start(t, pc, sc, testkit.NewHoldingRecorder("recorder"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)
	body := traceBody(t, 2, 10)
	for id := uint64(1); id <= 100; id++ {
		sendRaw(t, s, otepReq(t, id, body))
		resp, err := recvResp(t, s)
		if err == nil {
			if resp.ResultCode == otepv1.ResultCode_Success {
				continue
			}
			// The refused request is answered, then the stream ends.
			if resp.Id != id || resp.ResultCode != otepv1.ResultCode_FailedRetryable {
				t.Fatalf("id %d: %v", id, resp)
			}
			_, err = drainEOF(s)
		}
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || retryDelay(st) < 100*time.Millisecond {
			t.Fatalf("stream ended with %v, delay %v; want UNAVAILABLE with RetryInfo", err, retryDelay(st))
		}
		return
	}
	t.Fatal("the stream never ended under overload")
}

func TestStreamMaxRequests(t *testing.T) { onTransports(t, testStreamMaxRequests) }

func testStreamMaxRequests(t *testing.T, tr string) {
	sc := configFor(tr)
	sc.StreamMaxRequests = 100
	e := start(t, testPipelineConfig(), sc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)
	body := traceBody(t, 4, 1)
	// Pipelined: 150 are sent before any answer is read; the server takes 100 and ends the stream.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for id := uint64(1); id <= 150; id++ {
			var r rawBytes = otepReq(t, id, body)
			if s.SendMsg(r.raw()) != nil {
				return // the server ended the stream: the rest is the client's to re-send
			}
		}
	}()
	for id := uint64(1); id <= 100; id++ {
		resp, err := recvResp(t, s)
		if err != nil || resp.Id != id || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("answer %d: %v, %v", id, resp, err)
		}
	}
	if extra, err := drainEOF(s); err != nil || extra != 0 {
		t.Fatalf("stream end: %d extra answers, %v; want a clean end after 100", extra, err)
	}
	wg.Wait()
	e.p.Flush()
	if _, items := totals(e.rec); items != 100 {
		t.Fatalf("destination got %d, want exactly the 100 answered", items)
	}
}

// A stream past -grpc.stream.max-age ends even when no request comes: idle OTEP streams held
// whatever their call held (its metadata, up to -grpc.max-header-bytes) until the client sent
// again, which a hostile one never does. The answered requests are delivered; the end is clean
// and counted as a re-balance.
func TestStreamMaxAgeEndsIdleStream(t *testing.T) { onTransports(t, testStreamMaxAgeEndsIdleStream) }

func testStreamMaxAgeEndsIdleStream(t *testing.T, tr string) {
	sc := configFor(tr)
	sc.StreamMaxAge = 200 * time.Millisecond
	e := start(t, testPipelineConfig(), sc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := testutil.ToFloat64(ctr.rebalanceAge)
	s := e.rawStream(t, ctx)
	body := traceBody(t, 4, 1)
	sendRaw(t, s, otepReq(t, 1, body))
	if resp, err := recvResp(t, s); err != nil || resp.Id != 1 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("%v, %v", resp, err)
	}
	// Nothing more is sent: the server ends the stream on its own, long before ctx does.
	if extra, err := drainEOF(s); err != nil || extra != 0 {
		t.Fatalf("stream end: %d extra answers, %v; want a clean end", extra, err)
	}
	if got := testutil.ToFloat64(ctr.rebalanceAge) - before; got != 1 {
		t.Errorf("%v streams re-balanced by age, want 1", got)
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 1 {
		t.Fatalf("destination got %d, want 1", items)
	}
}

// A stream that reaches its age while a request waits for its upstream (-ack=upstream) answers
// it first, then ends.
func TestStreamMaxAgeAnswersAllAccepted(t *testing.T) {
	onTransports(t, testStreamMaxAgeAnswersAllAccepted)
}

func testStreamMaxAgeAnswersAllAccepted(t *testing.T, tr string) {
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	sc := configFor(tr)
	sc.StreamMaxAge = 100 * time.Millisecond
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, sc, rec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)
	body := traceBody(t, 4, 1)
	sendRaw(t, s, otepReq(t, 1, body))
	e.p.Flush()
	// The batch is held past the age: the answer is owed when the stream reaches it.
	testkit.WaitFor(t, "the batch to be held", func() bool { return rec.Held() == 1 })
	time.Sleep(2 * sc.StreamMaxAge)
	rec.Release(true)
	if resp, err := recvResp(t, s); err != nil || resp.Id != 1 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("%v, %v", resp, err)
	}
	if extra, err := drainEOF(s); err != nil || extra != 0 {
		t.Fatalf("stream end: %d, %v", extra, err)
	}
	if _, items := totals(e.rec); items != 1 {
		t.Fatalf("destination got %d, want 1", items)
	}
}

// -ack=upstream: answers wait for the destination and follow the order batches complete in.
func TestUpstreamAckOutOfOrder(t *testing.T) { onTransports(t, testUpstreamAckOutOfOrder) }

func testUpstreamAckOutOfOrder(t *testing.T, tr string) {
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	pc.BatchMaxItems = 1 // one request, one batch
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, configFor(tr), rec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := e.rawStream(t, ctx)
	body := traceBody(t, 4, 1)
	for id := uint64(1); id <= 5; id++ {
		sendRaw(t, s, otepReq(t, id, body))
	}
	testkit.WaitFor(t, "the five batches to reach the destination", func() bool { return rec.Count() == 5 })
	for want := uint64(5); want >= 1; want-- { // newest first
		rec.ReleaseAt(int(want-1), true)
		resp, err := recvResp(t, s)
		if err != nil || resp.Id != want || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("want id %d: %v, %v", want, resp, err)
		}
	}
	s.CloseSend()
	if _, err := drainEOF(s); err != nil {
		t.Fatal(err)
	}
}

func TestBearerToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	sc := DefaultConfig()
	sc.AuthTokenFile = tok
	e := start(t, testPipelineConfig(), sc, nil)
	c := otepv1.NewUnaryExporterClient(e.conn)
	req := &otepv1.TraceExportRequest{Id: 1}
	if _, err := c.ExportTraces(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	bad := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer wrong")
	if _, err := c.ExportTraces(bad, req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	good := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if resp, err := c.ExportTraces(good, req); err != nil || resp.Id != 1 {
		t.Fatalf("right token: %v, %v", resp, err)
	}
	st, err := otepv1.NewStreamExporterClient(e.conn).ExportTraces(context.Background())
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without token: %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.Listen = "nope" },
		func(c *Config) { c.MaxRecvMsgSize = 0 },
		func(c *Config) { c.MaxConcurrentStreams = 0 },
		func(c *Config) { c.InitialWindowSize = 1000 },
		func(c *Config) { c.StreamWindow = 0 },
		func(c *Config) { c.StreamMaxAge = -1 },
		func(c *Config) { c.TLSCert = "x" },
		func(c *Config) { c.TLSClientCA = "ca" },
		func(c *Config) { c.MaxConnectionsPerPeer = -1 },
		func(c *Config) { c.HandshakeTimeout = 0 },
		func(c *Config) { c.MaxConnectionAge = -1 },
		func(c *Config) { c.MaxHeaderBytes = 100 },
		func(c *Config) { c.RecvTimeout = 0 },
		func(c *Config) { c.MaxConnRecvBytes = int64(c.MaxRecvMsgSize) - 1 },
		func(c *Config) { c.MaxConnRecvBytes = -1 },
		func(c *Config) { c.StreamMaxUnsent = 0 },
		func(c *Config) { c.StreamAnswerTimeout = 0 },
		func(c *Config) { c.Transport = "h2o" },
	} {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("invalid config accepted: %+v", c)
		}
	}
	// The own transport serves OTEP streams: their settings are its too.
	c := DefaultConfig()
	c.Transport, c.StreamMaxAge, c.StreamMaxUnsent = TransportOwn, time.Minute, 8
	if err := c.Validate(); err != nil {
		t.Errorf("-grpc.stream.* with the own transport: %v", err)
	}
	// The per-connection cap follows a raised message size unless it is set.
	c = DefaultConfig()
	c.MaxRecvMsgSize = 64 << 20
	if err := c.Validate(); err != nil || c.connRecvBytes() != 128<<20 {
		t.Errorf("64MiB messages: %v, per-connection cap %d", err, c.connRecvBytes())
	}
	if _, err := New(Config{Listen: "127.0.0.1:1", AuthTokenFile: "/nonexistent"}, nil, nil); err == nil {
		t.Error("missing token file accepted")
	}
}
