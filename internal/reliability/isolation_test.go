package reliability

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Ids for the requests below: a well-formed trace id, and span ids (8 bytes) numbered by seq.
var goodTraceID = []byte("0123456789abcdef")

func spanID(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// idSpan is a span whose ids the test chooses; seq numbers it (span id, or name for spans whose
// span id is the malformed one).
func idSpan(seq uint64, traceID, sid []byte, parent []byte, links ...*tracev1.Span_Link) *tracev1.Span {
	return &tracev1.Span{TraceId: traceID, SpanId: sid, ParentSpanId: parent, Name: fmt.Sprint("span ", seq), Links: links}
}

func tracesOf(spans ...*tracev1.Span) *coltracev1.ExportTraceServiceRequest {
	var rs []*tracev1.ResourceSpans
	for _, sp := range spans {
		rs = append(rs, &tracev1.ResourceSpans{ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{sp}}}})
	}
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: rs}
}

// logsOf is a request of one log record, numbered by its span id.
func logsOf(traceID, sid []byte) *collogsv1.ExportLogsServiceRequest {
	return &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{ScopeLogs: []*logsv1.ScopeLogs{{
		LogRecords: []*logsv1.LogRecord{{TraceId: traceID, SpanId: sid, SeverityText: "INFO"}},
	}}}}}
}

// metricsOf is a request of one gauge point holding seq as its value, with one exemplar.
func metricsOf(seq int64, exTraceID, exSpanID []byte) *colmetricsv1.ExportMetricsServiceRequest {
	pt := &metricsv1.NumberDataPoint{Value: &metricsv1.NumberDataPoint_AsInt{AsInt: seq}, TimeUnixNano: 1,
		Exemplars: []*metricsv1.Exemplar{{TraceId: exTraceID, SpanId: exSpanID, Value: &metricsv1.Exemplar_AsInt{AsInt: 1}}}}
	return &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{ScopeMetrics: []*metricsv1.ScopeMetrics{{
		Metrics: []*metricsv1.Metric{{Name: "m", Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: []*metricsv1.NumberDataPoint{pt}}}}},
	}}}}}
}

// rawRequest is a request already encoded, for shapes the generated types cannot write.
type rawRequest []byte

func (r rawRequest) MarshalVT() ([]byte, error) { return r, nil }

// legacyScopeSpans is a trace request whose one resource entry holds, at field 1000 (reserved
// since OTLP 0.19, read by the Collector as scope entries), a span with a span id of 3 bytes.
func legacyScopeSpans() rawRequest {
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	return field(1, field(1000, field(2, field(2, []byte{1, 2, 3}))))
}

// badRequests are requests the Collector's decoder refuses for the length of one id, one of each
// place an id sits, with the signal each goes to.
func badRequests() []struct {
	name string
	sig  fastpath.Signal
	req  interface{ MarshalVT() ([]byte, error) }
} {
	return []struct {
		name string
		sig  fastpath.Signal
		req  interface{ MarshalVT() ([]byte, error) }
	}{
		{"trace id of 8 bytes", fastpath.Traces, tracesOf(idSpan(0, goodTraceID[:8], spanID(1<<40), nil))},
		{"span id of 16 bytes", fastpath.Traces, tracesOf(idSpan(0, goodTraceID, goodTraceID, nil))},
		{"parent span id of 9 bytes", fastpath.Traces, tracesOf(idSpan(0, goodTraceID, spanID(1<<40+1), make([]byte, 9)))},
		{"link trace id of 12 bytes", fastpath.Traces, tracesOf(idSpan(0, goodTraceID, spanID(1<<40+2), nil, &tracev1.Span_Link{TraceId: goodTraceID[:12], SpanId: spanID(1)}))},
		{"link span id of 7 bytes", fastpath.Traces, tracesOf(idSpan(0, goodTraceID, spanID(1<<40+3), nil, &tracev1.Span_Link{TraceId: goodTraceID, SpanId: spanID(1)[:7]}))},
		{"log trace id of 15 bytes", fastpath.Logs, logsOf(goodTraceID[:15], spanID(1<<40))},
		{"log span id of 4 bytes", fastpath.Logs, logsOf(goodTraceID, spanID(1 << 40)[:4])},
		{"exemplar trace id of 17 bytes", fastpath.Metrics, metricsOf(1<<40, append(goodTraceID, 'x'), spanID(1))},
		{"exemplar span id of 16 bytes", fastpath.Metrics, metricsOf(1<<40, goodTraceID, goodTraceID)},
		{"pre-0.19 scope spans with a span id of 3 bytes", fastpath.Traces, legacyScopeSpans()},
	}
}

var exportMethods = [fastpath.NumSignals]string{
	fastpath.Traces:  coltracev1.TraceService_Export_FullMethodName,
	fastpath.Metrics: colmetricsv1.MetricsService_Export_FullMethodName,
	fastpath.Logs:    collogsv1.LogsService_Export_FullMethodName,
}

// export makes one v1 Export call of the encoded request b and decodes the answer into resp.
func export(ctx context.Context, conn *grpc.ClientConn, sig fastpath.Signal, b []byte, resp any) error {
	var r codec.Raw
	r.SetBytes(b)
	return conn.Invoke(ctx, exportMethods[sig], &r, resp)
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Two clients share an otlpgate (gRPC intake, pipeline, a v1 destination) whose upstream
// validates as the OpenTelemetry Collector does (strictsink: pdata's decoder). One client sends
// well-formed traces, metrics and logs; the other, at the same time, requests each holding one
// id of a length the Collector refuses (a trace id of 8 bytes, a link's span id of 7, an
// exemplar's trace id of 17, ...). Batches are large and slow to seal, so that the two
// clients' requests share them. Every bad call is answered INVALID_ARGUMENT; a request mixing a
// good resource entry with a bad one is answered with partial success and its good entry
// delivered; over an OTEP stream the bad request is answered FailedNoneRetryable. The upstream
// refuses nothing, and receives every item of the well-behaved client exactly once.
func TestMalformedIDDoesNotPoisonSharedBatch(t *testing.T) {
	sink, err := strictsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	pc := pipelineConfig()
	pc.BatchMaxItems = 50
	pc.BatchMaxAge = 20 * time.Millisecond
	pc.Eager = false
	dc := destConfig("isolation_strict", sink.Addr())
	dc.Protocol, dc.Mode = client.ProtocolV1, client.ModeUnary
	g := startGate(t, pc, dc)

	refusedBefore := [fastpath.NumSignals]float64{}
	partialBefore := metric(t, "otlpgate_grpc_partially_rejected_entries_total", map[string]string{"signal": "traces"})
	otepBefore := metric(t, "otlpgate_grpc_refused_requests_total", map[string]string{"protocol": "otep_stream", "signal": "traces", "reason": "invalid"})
	for sig := range fastpath.NumSignals {
		refusedBefore[sig] = metric(t, "otlpgate_grpc_refused_requests_total", map[string]string{"protocol": "v1", "signal": sig.String(), "reason": "invalid"})
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const good, rounds = 150, 4 // per signal; the bad client sends every bad request rounds times
	bad := badRequests()
	goodConn, badConn := dial(t, g.addr), dial(t, g.addr)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // the well-behaved client
		defer wg.Done()
		conn := goodConn
		for i := uint64(1); i <= good; i++ {
			reqs := [fastpath.NumSignals]interface{ MarshalVT() ([]byte, error) }{
				fastpath.Traces:  tracesOf(idSpan(i, goodTraceID, spanID(i), spanID(i+1<<20))),
				fastpath.Metrics: metricsOf(int64(i), goodTraceID, spanID(i)),
				fastpath.Logs:    logsOf(goodTraceID, spanID(i)),
			}
			for sig, req := range reqs {
				b, err := req.MarshalVT()
				if err != nil {
					errs <- err
					return
				}
				var resp codec.Raw
				err = export(ctx, conn, fastpath.Signal(sig), b, &resp)
				resp.Release()
				if err != nil {
					errs <- fmt.Errorf("good %v request %d: %w", fastpath.Signal(sig), i, err)
					return
				}
			}
		}
		errs <- nil
	}()
	go func() { // the other client
		defer wg.Done()
		conn := badConn
		for r := range rounds {
			for _, c := range bad {
				b, err := c.req.MarshalVT()
				if err != nil {
					errs <- err
					return
				}
				var resp codec.Raw
				err = export(ctx, conn, c.sig, b, &resp)
				resp.Release()
				if status.Code(err) != codes.InvalidArgument {
					errs <- fmt.Errorf("round %d, %s: answered %v, want INVALID_ARGUMENT", r, c.name, err)
					return
				}
			}
		}
		errs <- nil
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// A request holding a good resource entry and a bad one keeps the good one.
	conn := dial(t, g.addr)
	mixed, err := tracesOf(idSpan(0, goodTraceID[:3], spanID(1<<40), nil), idSpan(good+1, goodTraceID, spanID(good+1), nil)).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	var resp coltracev1.ExportTraceServiceResponse
	if err := export(ctx, conn, fastpath.Traces, mixed, &resp); err != nil {
		t.Fatalf("mixed request: %v", err)
	}
	if ps := resp.GetPartialSuccess(); ps.GetRejectedSpans() != 1 || ps.GetErrorMessage() == "" {
		t.Fatalf("mixed request answered %v, want partial success with 1 rejected span", &resp)
	}

	// Over an OTEP stream: the bad request is FailedNoneRetryable, the good one beside it Success.
	st, err := otepv1.NewStreamExporterClient(conn).ExportTraces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	otepBad := tracesOf(idSpan(0, goodTraceID, make([]byte, 12), nil))
	otepGood := tracesOf(idSpan(good+2, goodTraceID, spanID(good+2), nil))
	for id, req := range []*coltracev1.ExportTraceServiceRequest{otepBad, otepGood} {
		if err := st.Send(&otepv1.TraceExportRequest{Id: uint64(id + 1), ResourceSpans: req.ResourceSpans}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[uint64]otepv1.ResultCode{1: otepv1.ResultCode_FailedNoneRetryable, 2: otepv1.ResultCode_Success}
	for range 2 {
		a, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if a.ResultCode != want[a.Id] {
			t.Fatalf("OTEP request %d answered %v, want %v", a.Id, a.ResultCode, want[a.Id])
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err == nil {
		t.Fatal("the OTEP stream sent an answer to no request")
	}

	g.drained(t, time.Minute)
	for sig := range fastpath.NumSignals {
		if n := sink.Refused(sig); n != 0 {
			t.Fatalf("the upstream refused %d %v batches: %v", n, sig, sink.LastError())
		}
	}

	// Every item of the well-behaved client (and the good entries beside bad ones) arrived
	// once, and nothing else did.
	spans := sink.Spans()
	for i := uint64(1); i <= good+2; i++ {
		if n := spans[pcommon.SpanID(spanID(i))]; n != 1 {
			t.Fatalf("span %d arrived %d times, want once (%d spans arrived)", i, n, len(spans))
		}
	}
	if len(spans) != good+2 {
		t.Fatalf("%d distinct spans arrived, want %d", len(spans), good+2)
	}
	logs := map[pcommon.SpanID]int{}
	for _, ld := range sink.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					logs[lr.SpanID()]++
				}
			}
		}
	}
	points := map[int64]int{}
	for _, md := range sink.Metrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					for _, dp := range m.Gauge().DataPoints().All() {
						points[dp.IntValue()]++
					}
				}
			}
		}
	}
	for i := uint64(1); i <= good; i++ {
		if logs[pcommon.SpanID(spanID(i))] != 1 || points[int64(i)] != 1 {
			t.Fatalf("log record %d arrived %d times, data point %d %d times; want once each",
				i, logs[pcommon.SpanID(spanID(i))], i, points[int64(i)])
		}
	}
	if len(logs) != good || len(points) != good {
		t.Fatalf("%d distinct log records and %d data points arrived, want %d each", len(logs), len(points), good)
	}

	// Each refusal is counted: the bad calls under reason "invalid". The mixed one kept its
	// good entry: it is not refused, its bad entry is counted as a partial rejection.
	perSig := [fastpath.NumSignals]int{}
	for _, c := range bad {
		perSig[c.sig] += rounds
	}
	for sig := range fastpath.NumSignals {
		got := metric(t, "otlpgate_grpc_refused_requests_total", map[string]string{"protocol": "v1", "signal": sig.String(), "reason": "invalid"}) - refusedBefore[sig]
		if got != float64(perSig[sig]) {
			t.Fatalf("%v: %v requests counted as invalid, want %d", sig, got, perSig[sig])
		}
	}
	if got := metric(t, "otlpgate_grpc_partially_rejected_entries_total", map[string]string{"signal": "traces"}) - partialBefore; got != 1 {
		t.Fatalf("%v partially rejected entries counted, want 1", got)
	}
	if got := metric(t, "otlpgate_grpc_refused_requests_total", map[string]string{"protocol": "otep_stream", "signal": "traces", "reason": "invalid"}) - otepBefore; got != 1 {
		t.Fatalf("%v OTEP requests counted as invalid, want 1", got)
	}
	if d := metric(t, "otlpgate_client_dropped_requests_total", map[string]string{"destination": "isolation_strict"}); d != 0 {
		t.Fatalf("the destination dropped %v requests", d)
	}
}
