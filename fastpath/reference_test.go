package fastpath_test

import (
	"testing"

	// Must come before the reference types register: see its doc.
	_ "github.com/otlpgate/otlpgate/internal/protoreg"

	"google.golang.org/protobuf/proto"

	otlplogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	otlpmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	otlptrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	otlpcommon "go.opentelemetry.io/proto/otlp/common/v1"
	otlplogsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	otlpmetricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	otlpresource "go.opentelemetry.io/proto/otlp/resource/v1"
	otlptracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Requests encoded by the reference Go types of go.opentelemetry.io/proto/otlp, which marshal
// through the protobuf runtime rather than vtprotobuf: what SDKs and the Collector send.

func refMarshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func refStr(s string) *otlpcommon.AnyValue {
	return &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_StringValue{StringValue: s}}
}

func refAttrs() []*otlpcommon.KeyValue {
	return []*otlpcommon.KeyValue{
		{Key: "service.name", Value: refStr("checkout")},
		{Key: "retries", Value: &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_IntValue{IntValue: 3}}},
		{Key: "tags", Value: &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_ArrayValue{ArrayValue: &otlpcommon.ArrayValue{
			Values: []*otlpcommon.AnyValue{refStr("a"), {Value: &otlpcommon.AnyValue_DoubleValue{DoubleValue: 0.25}}},
		}}}},
		{Key: "map", Value: &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_KvlistValue{KvlistValue: &otlpcommon.KeyValueList{
			Values: []*otlpcommon.KeyValue{{Key: "ok", Value: &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_BoolValue{BoolValue: true}}}},
		}}}},
	}
}

func refResource() *otlpresource.Resource {
	return &otlpresource.Resource{Attributes: refAttrs(), EntityRefs: []*otlpcommon.EntityRef{{Type: "service", IdKeys: []string{"service.name"}}}}
}

// refFixtures: requests of every signal marshalled by the reference types.
func refFixtures(tb testing.TB) []fixture {
	tb.Helper()
	scope := &otlpcommon.InstrumentationScope{Name: "ref", Version: "1"}
	traces := &otlptrace.ExportTraceServiceRequest{ResourceSpans: []*otlptracev1.ResourceSpans{{
		Resource: refResource(),
		ScopeSpans: []*otlptracev1.ScopeSpans{{Scope: scope, Spans: []*otlptracev1.Span{
			{
				TraceId: traceID, SpanId: spanID, Name: "GET /cart", Kind: otlptracev1.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: 10, EndTimeUnixNano: 20, Attributes: refAttrs(), Flags: 0x101,
				Events: []*otlptracev1.Span_Event{{TimeUnixNano: 15, Name: "retry", Attributes: refAttrs()[:1]}},
				Links:  []*otlptracev1.Span_Link{{TraceId: traceID, SpanId: spanID, Flags: 1}},
				Status: &otlptracev1.Status{Code: otlptracev1.Status_STATUS_CODE_OK},
			},
			{TraceId: traceID, SpanId: spanID, ParentSpanId: spanID, Name: "db"},
		}}},
	}}}
	pt := func(v float64) *otlpmetricsv1.NumberDataPoint {
		return &otlpmetricsv1.NumberDataPoint{TimeUnixNano: 5, Value: &otlpmetricsv1.NumberDataPoint_AsDouble{AsDouble: v},
			Exemplars: []*otlpmetricsv1.Exemplar{{SpanId: spanID, Value: &otlpmetricsv1.Exemplar_AsInt{AsInt: 1}}}}
	}
	sum := 7.0
	metrics := &otlpmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*otlpmetricsv1.ResourceMetrics{{
		Resource: refResource(),
		ScopeMetrics: []*otlpmetricsv1.ScopeMetrics{{Scope: scope, Metrics: []*otlpmetricsv1.Metric{
			{Name: "g", Data: &otlpmetricsv1.Metric_Gauge{Gauge: &otlpmetricsv1.Gauge{DataPoints: []*otlpmetricsv1.NumberDataPoint{pt(1), pt(2)}}}},
			{Name: "s", Data: &otlpmetricsv1.Metric_Sum{Sum: &otlpmetricsv1.Sum{IsMonotonic: true, DataPoints: []*otlpmetricsv1.NumberDataPoint{pt(3)}}}},
			{Name: "h", Data: &otlpmetricsv1.Metric_Histogram{Histogram: &otlpmetricsv1.Histogram{DataPoints: []*otlpmetricsv1.HistogramDataPoint{
				{Count: 3, Sum: &sum, BucketCounts: []uint64{1, 2}, ExplicitBounds: []float64{5}, Min: &sum},
			}}}},
			{Name: "e", Data: &otlpmetricsv1.Metric_ExponentialHistogram{ExponentialHistogram: &otlpmetricsv1.ExponentialHistogram{
				DataPoints: []*otlpmetricsv1.ExponentialHistogramDataPoint{
					{Count: 4, Scale: 2, Positive: &otlpmetricsv1.ExponentialHistogramDataPoint_Buckets{Offset: -1, BucketCounts: []uint64{1, 3, 200}}},
					{},
				},
			}}},
			{Name: "q", Data: &otlpmetricsv1.Metric_Summary{Summary: &otlpmetricsv1.Summary{DataPoints: []*otlpmetricsv1.SummaryDataPoint{
				{Count: 2, Sum: 3, QuantileValues: []*otlpmetricsv1.SummaryDataPoint_ValueAtQuantile{{Quantile: 0.99, Value: 2}}},
			}}}},
		}}},
	}}}
	logs := &otlplogs.ExportLogsServiceRequest{ResourceLogs: []*otlplogsv1.ResourceLogs{
		{Resource: refResource(), ScopeLogs: []*otlplogsv1.ScopeLogs{{Scope: scope, LogRecords: []*otlplogsv1.LogRecord{
			{TimeUnixNano: 1, SeverityNumber: otlplogsv1.SeverityNumber_SEVERITY_NUMBER_ERROR, SeverityText: "ERROR",
				Body: refAttrs()[3].Value, Attributes: refAttrs(), TraceId: traceID, SpanId: spanID, EventName: "e"},
			{Body: refStr("line")},
			{},
		}}}},
		{ScopeLogs: []*otlplogsv1.ScopeLogs{{LogRecords: []*otlplogsv1.LogRecord{{Body: refStr("other")}}}}},
	}}
	return []fixture{
		{"traces-reference", fastpath.Traces, refMarshal(tb, traces), 1, 2},
		{"metrics-reference", fastpath.Metrics, refMarshal(tb, metrics), 1, 7},
		{"logs-reference", fastpath.Logs, refMarshal(tb, logs), 2, 4},
	}
}

// TestScanReferenceRequests runs the differential checks on bytes from the reference encoder.
func TestScanReferenceRequests(t *testing.T) {
	for _, fx := range refFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			d, err := decode(fx.sig, fastpath.LayoutV1, fx.v1)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.items) != fx.resources || d.total() != fx.items {
				t.Fatalf("decoded %d resources, %d items; fixture says %d, %d", len(d.items), d.total(), fx.resources, fx.items)
			}
			for _, depth := range depths {
				got, err := fastpath.ScanRequest(fx.sig, fx.v1, fastpath.LayoutV1, depth)
				if err != nil {
					t.Fatalf("%v: %v", depth, err)
				}
				if want := wantScan(d, fastpath.LayoutV1, depth); got != want {
					t.Fatalf("%v: got %+v, want %+v", depth, got, want)
				}
			}
			otep, err := fastpath.AppendOTEP(nil, 99, fx.v1)
			if err != nil {
				t.Fatal(err)
			}
			if err := sameEntries(t, fx.sig, fx.v1, otep, 99); err != nil {
				t.Fatal(err)
			}
		})
	}
}
