package grpcserver

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// signalCase is one signal's v1 and OTEP methods and a one-item v1 body named by its seed.
type signalCase struct {
	sig             fastpath.Signal
	v1, unary, strm string
	body            func(t *testing.T, seed uint64) []byte
	newV1Response   func() any
}

func signalCases() []signalCase {
	return []signalCase{
		{fastpath.Traces, coltracev1.TraceService_Export_FullMethodName, otepv1.UnaryExporter_ExportTraces_FullMethodName,
			otepv1.StreamExporter_ExportTraces_FullMethodName,
			func(t *testing.T, seed uint64) []byte { return traceBody(t, seed, 1) },
			func() any { return &coltracev1.ExportTraceServiceResponse{} }},
		{fastpath.Metrics, colmetricsv1.MetricsService_Export_FullMethodName, otepv1.UnaryExporter_ExportMetrics_FullMethodName,
			otepv1.StreamExporter_ExportMetrics_FullMethodName,
			func(t *testing.T, seed uint64) []byte {
				req := &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{ScopeMetrics: []*metricsv1.ScopeMetrics{{
					Metrics: []*metricsv1.Metric{{Name: "m", Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{
						DataPoints: []*metricsv1.NumberDataPoint{{TimeUnixNano: seed}}}}}}}}}}}
				b, err := req.MarshalVT()
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			func() any { return &colmetricsv1.ExportMetricsServiceResponse{} }},
		{fastpath.Logs, collogsv1.LogsService_Export_FullMethodName, otepv1.UnaryExporter_ExportLogs_FullMethodName,
			otepv1.StreamExporter_ExportLogs_FullMethodName,
			func(t *testing.T, seed uint64) []byte {
				req := &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{ScopeLogs: []*logsv1.ScopeLogs{{
					LogRecords: []*logsv1.LogRecord{{TimeUnixNano: seed}}}}}}}
				b, err := req.MarshalVT()
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			func() any { return &collogsv1.ExportLogsServiceResponse{} }},
	}
}

// Every intake method of every signal admits the known content of a request carrying odd
// top-level fields and nothing else of it: batches hold the entries only, and the stripped
// fields are counted. A request whose top level is malformed is refused whole.
func TestIntakeStripsUnknownTopLevelFields(t *testing.T) {
	odd := []byte{0x12, 0x00, 0x28, 0x07}     // v1: field 2 (empty bytes) and field 5 (varint)
	oddOTEP := []byte{0x1a, 0x00, 0x28, 0x07} // OTEP: field 3 (empty bytes) and field 5 (varint)
	for _, sc := range signalCases() {
		t.Run(sc.sig.String(), func(t *testing.T) {
			e := start(t, testPipelineConfig(), DefaultConfig(), nil)
			ctx := context.Background()
			strippedBefore := stripped(t, sc.sig)
			var want []byte
			// v1 unary: odd fields after and before the entries.
			for i, req := range [][]byte{
				append(sc.body(t, 1), odd...),
				append(append([]byte(nil), odd...), sc.body(t, 2)...),
			} {
				var r rawBytes = req
				if err := e.raw.Invoke(ctx, sc.v1, r.raw(), sc.newV1Response()); err != nil {
					t.Fatalf("v1 request %d: %v", i, err)
				}
				want = append(want, sc.body(t, uint64(i+1))...)
			}
			// OTEP unary and stream.
			otep := append(otepReq(t, 77, sc.body(t, 3)), oddOTEP...)
			var r rawBytes = otep
			var resp otepv1.ExportResponse
			if err := e.raw.Invoke(ctx, sc.unary, r.raw(), &resp); err != nil || resp.Id != 77 || resp.ResultCode != otepv1.ResultCode_Success {
				t.Fatalf("OTEP unary: %v, %v", &resp, err)
			}
			want = append(want, sc.body(t, 3)...)
			s, err := e.raw.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, sc.strm)
			if err != nil {
				t.Fatal(err)
			}
			sendRaw(t, s, append(append([]byte(nil), oddOTEP...), otepReq(t, 78, sc.body(t, 4))...))
			if resp, err := recvResp(t, s); err != nil || resp.Id != 78 || resp.ResultCode != otepv1.ResultCode_Success {
				t.Fatalf("OTEP stream: %v, %v", resp, err)
			}
			// A malformed top level (a length past the end after the odd fields) is refused.
			sendRaw(t, s, append(append(otepReq(t, 79, sc.body(t, 5)), oddOTEP...), 0x3a, 0x09))
			if resp, err := recvResp(t, s); err != nil || resp.Id != 79 || resp.ResultCode != otepv1.ResultCode_FailedNoneRetryable {
				t.Fatalf("malformed OTEP request: %v, %v", resp, err)
			}
			s.CloseSend()
			if _, err := drainEOF(s); err != nil {
				t.Fatal(err)
			}
			want = append(want, sc.body(t, 4)...)
			var bad rawBytes = append(append(sc.body(t, 6), odd...), 0x0a, 0x09)
			if err := e.raw.Invoke(ctx, sc.v1, bad.raw(), sc.newV1Response()); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("malformed v1 request: %v, want InvalidArgument", err)
			}

			e.p.Flush()
			batches, items := totals(e.rec)
			var got []byte
			for _, b := range batches {
				got = append(got, b...)
			}
			if !bytes.Equal(got, want) || items != 4 {
				t.Fatalf("batches hold %d bytes (%d items), want exactly the %d bytes of the entries (4 items)", len(got), items, len(want))
			}
			// 2 fields in each of the two v1 requests, the OTEP unary and the OTEP stream request.
			if n := stripped(t, sc.sig) - strippedBefore; n != 8 {
				t.Fatalf("stripped fields counted %v, want 8", n)
			}
		})
	}
}

// The partial-success path of v1 (some entries malformed inside) keeps the good entries and
// strips odd top-level fields like every other path.
func TestV1PartialSuccessStripsUnknownFields(t *testing.T) {
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	good := traceBody(t, 6, 2)
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x12, 0x04, 0x12, 0x02, 0x0a, 0x05})
	req := append(append(append(append([]byte{0x12, 0x00}, good...), 0x28, 0x07), bad...), 0x3a, 0x01, 'x')
	var r rawBytes = req
	var resp coltracev1.ExportTraceServiceResponse
	strippedBefore := stripped(t, fastpath.Traces)
	if err := e.raw.Invoke(context.Background(), coltracev1.TraceService_Export_FullMethodName, r.raw(), &resp); err != nil {
		t.Fatal(err)
	}
	if ps := resp.PartialSuccess; ps == nil || ps.ErrorMessage != "1 of 2 resource entries were malformed and dropped" {
		t.Fatalf("partial success = %v", ps)
	}
	e.p.Flush()
	batches, items := totals(e.rec)
	if len(batches) != 1 || !bytes.Equal(batches[0], good) || items != 2 {
		t.Fatalf("%d batches (%d items), want one holding exactly the good entry", len(batches), items)
	}
	if n := stripped(t, fastpath.Traces) - strippedBefore; n != 3 {
		t.Fatalf("stripped fields counted %v, want 3", n)
	}
}

// stripped reads otlpgate_fastpath_stripped_fields_total for sig from the default registry.
func stripped(t *testing.T, sig fastpath.Signal) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "otlpgate_fastpath_stripped_fields_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "signal" && l.GetValue() == sig.String() {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
