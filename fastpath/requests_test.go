package fastpath_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// The requests the tests scan, built with our generated types so that the decoded message is
// the oracle for every count. Together they set every field of every OTLP message, each oneof
// member, both forms of every repeated scalar the encoder writes, and empty entries at each
// level.

// fixture is one real request: v1 holds the MarshalVT bytes of its v1 Export request.
type fixture struct {
	name      string
	sig       fastpath.Signal
	v1        []byte
	resources int // stated by hand, cross-checked against the decoded message
	items     int
}

func mustMarshal(tb testing.TB, m interface{ MarshalVT() ([]byte, error) }) []byte {
	tb.Helper()
	b, err := m.MarshalVT()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fixtures returns every hand-built request plus Appendix B span batches from otlpgen.
func fixtures(tb testing.TB) []fixture {
	tb.Helper()
	return []fixture{
		{"traces-every-field", fastpath.Traces, mustMarshal(tb, everyFieldTraces()), 3, 6},
		{"metrics-every-type", fastpath.Metrics, mustMarshal(tb, everyTypeMetrics()), 2, 14},
		{"logs-every-field", fastpath.Logs, mustMarshal(tb, everyFieldLogs()), 2, 4},
		{"traces-empty", fastpath.Traces, nil, 0, 0},
		{"metrics-empty", fastpath.Metrics, nil, 0, 0},
		{"logs-empty", fastpath.Logs, nil, 0, 0},
		{"traces-otlpgen-tiny", fastpath.Traces, mustMarshal(tb, otlpgen.New(1).Spans(otlpgen.Shape{Spans: 5, Attrs: 4})), 1, 5},
		{"traces-otlpgen-small", fastpath.Traces, mustMarshal(tb, otlpgen.New(2).Spans(otlpgen.Small)), 1, 100},
		{"traces-otlpgen-large", fastpath.Traces, mustMarshal(tb, otlpgen.New(3).Spans(otlpgen.Large)), 1, 500},
	}
}

func str(s string) *commonv1.AnyValue {
	return &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: s}}
}

// attrs returns attributes holding every AnyValue member, with arrays and maps nested three
// deep.
func attrs() []*commonv1.KeyValue {
	inner := &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{
		Values: []*commonv1.KeyValue{
			{Key: "deep", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{
				Values: []*commonv1.AnyValue{str("x"), {Value: &commonv1.AnyValue_IntValue{IntValue: -1}}},
			}}}},
			{Key: "empty", Value: &commonv1.AnyValue{}},
		},
	}}}
	return []*commonv1.KeyValue{
		{Key: "string", Value: str("value")},
		{Key: "bool", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: true}}},
		{Key: "int", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: math.MinInt64}}},
		{Key: "double", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: 3.5}}},
		{Key: "bytes", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_BytesValue{BytesValue: []byte{0, 0xff}}}},
		{Key: "strindex", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValueStrindex{StringValueStrindex: 7}}},
		{KeyStrindex: 3, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{
			Values: []*commonv1.AnyValue{inner, str("y"), {}},
		}}}},
		{Key: "kvlist", Value: inner},
		{Key: "nil"},
	}
}

func resource() *resourcev1.Resource {
	return &resourcev1.Resource{
		Attributes:             attrs(),
		DroppedAttributesCount: 2,
		EntityRefs: []*commonv1.EntityRef{{
			SchemaUrl:       "https://opentelemetry.io/schemas/1.30.0",
			Type:            "service",
			IdKeys:          []string{"service.name", "service.namespace"},
			DescriptionKeys: []string{"service.version"},
		}},
	}
}

func scope() *commonv1.InstrumentationScope {
	return &commonv1.InstrumentationScope{Name: "scope", Version: "1.2.3", Attributes: attrs()[:3], DroppedAttributesCount: 1}
}

var (
	traceID = []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	spanID  = []byte{1, 2, 3, 4, 5, 6, 7, 8}
)

// everyFieldTraces: 3 resources, 6 spans.
func everyFieldTraces() *coltracev1.ExportTraceServiceRequest {
	full := &tracev1.Span{
		TraceId: traceID, SpanId: spanID, TraceState: "k=v", ParentSpanId: spanID, Flags: 0x301,
		Name: "full", Kind: tracev1.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: 1, EndTimeUnixNano: math.MaxUint64,
		Attributes: attrs(), DroppedAttributesCount: 1,
		Events: []*tracev1.Span_Event{
			{TimeUnixNano: 5, Name: "event", Attributes: attrs()[:2], DroppedAttributesCount: 4},
			{},
		},
		DroppedEventsCount: 2,
		Links: []*tracev1.Span_Link{
			{TraceId: traceID, SpanId: spanID, TraceState: "a=b", Attributes: attrs()[2:4], DroppedAttributesCount: 1, Flags: 0x100},
			{},
		},
		DroppedLinksCount: 3,
		Status:            &tracev1.Status{Message: "boom", Code: tracev1.Status_STATUS_CODE_ERROR},
	}
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{
		{
			Resource: resource(),
			ScopeSpans: []*tracev1.ScopeSpans{
				{Scope: scope(), Spans: []*tracev1.Span{full, {Name: "bare"}, {}}, SchemaUrl: "https://s/1"},
				{}, // a scope with no spans
			},
			SchemaUrl: "https://s/2",
		},
		{}, // a resource with nothing in it
		{ScopeSpans: []*tracev1.ScopeSpans{
			{Spans: []*tracev1.Span{{Name: "a"}, {Name: "b", Status: &tracev1.Status{}}}},
			{Spans: []*tracev1.Span{{Name: "c"}}},
		}},
	}}
}

func f64(v float64) *float64 { return &v }

func exemplars() []*metricsv1.Exemplar {
	return []*metricsv1.Exemplar{
		{FilteredAttributes: attrs()[:2], TimeUnixNano: 9, Value: &metricsv1.Exemplar_AsDouble{AsDouble: 1.5}, SpanId: spanID, TraceId: traceID},
		{Value: &metricsv1.Exemplar_AsInt{AsInt: -4}},
		{},
	}
}

func numberPoints(n int) []*metricsv1.NumberDataPoint {
	pts := make([]*metricsv1.NumberDataPoint, n)
	for i := range pts {
		pts[i] = &metricsv1.NumberDataPoint{Attributes: attrs()[:1], StartTimeUnixNano: 1, TimeUnixNano: uint64(2 + i), Flags: 1}
		if i%2 == 0 {
			pts[i].Value = &metricsv1.NumberDataPoint_AsInt{AsInt: int64(-i)}
		} else {
			pts[i].Value = &metricsv1.NumberDataPoint_AsDouble{AsDouble: float64(i) / 3}
		}
	}
	pts[0].Exemplars = exemplars()
	return pts
}

// everyTypeMetrics: 2 resources, 14 data points (gauge 3 + sum 2 + histogram 2 + exponential 2
// + summary 2, then gauge 1 + sum 2 in the second resource), and a metric with no data.
func everyTypeMetrics() *colmetricsv1.ExportMetricsServiceRequest {
	hist := []*metricsv1.HistogramDataPoint{
		{
			Attributes: attrs()[:2], StartTimeUnixNano: 1, TimeUnixNano: 2, Count: 6, Sum: f64(12.5),
			BucketCounts: []uint64{1, 2, 3}, ExplicitBounds: []float64{0.5, 10},
			Exemplars: exemplars(), Flags: 1, Min: f64(-1), Max: f64(1e9),
		},
		{},
	}
	exp := []*metricsv1.ExponentialHistogramDataPoint{
		{
			Attributes: attrs()[:2], StartTimeUnixNano: 1, TimeUnixNano: 2, Count: 300, Sum: f64(4),
			Scale: -3, ZeroCount: 7,
			Positive:  &metricsv1.ExponentialHistogramDataPoint_Buckets{Offset: -2, BucketCounts: []uint64{0, 1, 300, math.MaxUint64}},
			Negative:  &metricsv1.ExponentialHistogramDataPoint_Buckets{Offset: 5},
			Flags:     1,
			Exemplars: exemplars(), Min: f64(0), Max: f64(8), ZeroThreshold: 1e-9,
		},
		{},
	}
	summary := []*metricsv1.SummaryDataPoint{
		{
			Attributes: attrs()[:1], StartTimeUnixNano: 1, TimeUnixNano: 2, Count: 3, Sum: 9,
			QuantileValues: []*metricsv1.SummaryDataPoint_ValueAtQuantile{{Quantile: 0.5, Value: 2}, {}},
			Flags:          1,
		},
		{},
	}
	return &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{
		{
			Resource: resource(),
			ScopeMetrics: []*metricsv1.ScopeMetrics{{
				Scope: scope(),
				Metrics: []*metricsv1.Metric{
					{Name: "gauge", Description: "d", Unit: "1", Metadata: attrs()[:2],
						Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: numberPoints(3)}}},
					{Name: "sum", Data: &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{
						DataPoints: numberPoints(2), AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, IsMonotonic: true}}},
					{Name: "histogram", Data: &metricsv1.Metric_Histogram{Histogram: &metricsv1.Histogram{
						DataPoints: hist, AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA}}},
					{Name: "exponential", Data: &metricsv1.Metric_ExponentialHistogram{ExponentialHistogram: &metricsv1.ExponentialHistogram{
						DataPoints: exp, AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA}}},
					{Name: "summary", Data: &metricsv1.Metric_Summary{Summary: &metricsv1.Summary{DataPoints: summary}}},
					{Name: "no-data"},
					{Name: "empty-gauge", Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{}}},
				},
				SchemaUrl: "https://s/3",
			}, {}},
			SchemaUrl: "https://s/4",
		},
		{ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: []*metricsv1.Metric{
			{Name: "g", Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: numberPoints(1)}}},
			{Name: "s", Data: &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{DataPoints: numberPoints(2)}}},
		}}}},
	}}
}

// everyFieldLogs: 2 resources, 4 log records.
func everyFieldLogs() *collogsv1.ExportLogsServiceRequest {
	full := &logsv1.LogRecord{
		TimeUnixNano: 1, ObservedTimeUnixNano: 2, SeverityNumber: logsv1.SeverityNumber_SEVERITY_NUMBER_WARN,
		SeverityText: "WARN", Body: attrs()[6].Value, Attributes: attrs(), DroppedAttributesCount: 3,
		Flags: 1, TraceId: traceID, SpanId: spanID, EventName: "event",
	}
	return &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{
		{
			Resource: resource(),
			ScopeLogs: []*logsv1.ScopeLogs{
				{Scope: scope(), LogRecords: []*logsv1.LogRecord{full, {Body: str("plain")}}, SchemaUrl: "https://s/5"},
				{},
			},
			SchemaUrl: "https://s/6",
		},
		{ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: []*logsv1.LogRecord{{}, {SeverityText: "x"}}}}},
	}}
}

// decoded is what UnmarshalVT makes of a request: the oracle for ScanRequest.
type decoded struct {
	id    uint64
	items []int // items of each resource entry, in order
}

func (d decoded) total() int {
	n := 0
	for _, v := range d.items {
		n += v
	}
	return n
}

// decode unmarshals b as a request of sig in layout with our vtprotobuf types and counts what
// the decoded message holds.
func decode(sig fastpath.Signal, layout fastpath.Layout, b []byte) (decoded, error) {
	var d decoded
	switch sig {
	case fastpath.Traces:
		var rs []*tracev1.ResourceSpans
		if layout == fastpath.LayoutV1 {
			var m coltracev1.ExportTraceServiceRequest
			if err := m.UnmarshalVT(b); err != nil {
				return d, err
			}
			rs = m.ResourceSpans
		} else {
			var m otepv1.TraceExportRequest
			if err := m.UnmarshalVT(b); err != nil {
				return d, err
			}
			d.id, rs = m.Id, m.ResourceSpans
		}
		for _, r := range rs {
			n := 0
			for _, s := range r.ScopeSpans {
				n += len(s.Spans)
			}
			d.items = append(d.items, n)
		}
	case fastpath.Metrics:
		var rm []*metricsv1.ResourceMetrics
		if layout == fastpath.LayoutV1 {
			var m colmetricsv1.ExportMetricsServiceRequest
			if err := m.UnmarshalVT(b); err != nil {
				return d, err
			}
			rm = m.ResourceMetrics
		} else {
			var m otepv1.MetricExportRequest
			if err := m.UnmarshalVT(b); err != nil {
				return d, err
			}
			d.id, rm = m.Id, m.ResourceMetrics
		}
		for _, r := range rm {
			n := 0
			for _, s := range r.ScopeMetrics {
				for _, m := range s.Metrics {
					n += dataPoints(m)
				}
			}
			d.items = append(d.items, n)
		}
	case fastpath.Logs:
		var rl []*logsv1.ResourceLogs
		if layout == fastpath.LayoutV1 {
			var m collogsv1.ExportLogsServiceRequest
			if err := m.UnmarshalVT(b); err != nil {
				return d, err
			}
			rl = m.ResourceLogs
		} else {
			var m otepv1.LogExportRequest
			if err := m.UnmarshalVT(b); err != nil {
				return d, err
			}
			d.id, rl = m.Id, m.ResourceLogs
		}
		for _, r := range rl {
			n := 0
			for _, s := range r.ScopeLogs {
				n += len(s.LogRecords)
			}
			d.items = append(d.items, n)
		}
	default:
		return d, fmt.Errorf("signal %d", sig)
	}
	return d, nil
}

func dataPoints(m *metricsv1.Metric) int {
	switch d := m.Data.(type) {
	case *metricsv1.Metric_Gauge:
		return len(d.Gauge.DataPoints)
	case *metricsv1.Metric_Sum:
		return len(d.Sum.DataPoints)
	case *metricsv1.Metric_Histogram:
		return len(d.Histogram.DataPoints)
	case *metricsv1.Metric_ExponentialHistogram:
		return len(d.ExponentialHistogram.DataPoints)
	case *metricsv1.Metric_Summary:
		return len(d.Summary.DataPoints)
	}
	return 0
}

// otepMarshal returns the MarshalVT bytes of the OTEP request holding id and the entries of
// the v1 request v1: what AppendOTEP must produce.
func otepMarshal(tb testing.TB, sig fastpath.Signal, id uint64, v1 []byte) []byte {
	tb.Helper()
	switch sig {
	case fastpath.Traces:
		var m coltracev1.ExportTraceServiceRequest
		if err := m.UnmarshalVT(v1); err != nil {
			tb.Fatal(err)
		}
		return mustMarshal(tb, &otepv1.TraceExportRequest{Id: id, ResourceSpans: m.ResourceSpans})
	case fastpath.Metrics:
		var m colmetricsv1.ExportMetricsServiceRequest
		if err := m.UnmarshalVT(v1); err != nil {
			tb.Fatal(err)
		}
		return mustMarshal(tb, &otepv1.MetricExportRequest{Id: id, ResourceMetrics: m.ResourceMetrics})
	case fastpath.Logs:
		var m collogsv1.ExportLogsServiceRequest
		if err := m.UnmarshalVT(v1); err != nil {
			tb.Fatal(err)
		}
		return mustMarshal(tb, &otepv1.LogExportRequest{Id: id, ResourceLogs: m.ResourceLogs})
	}
	tb.Fatalf("signal %d", sig)
	return nil
}
