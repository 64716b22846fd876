package fastpath

import (
	"bytes"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func str(s string) *commonv1.AnyValue {
	return &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: s}}
}

func kv(k string, v *commonv1.AnyValue) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: v}
}

func f64p(x float64) *float64 { return &x }

var (
	exTraceID = mustHex("5b8efff798038103d269b633813fc60c")
	exSpanID  = mustHex("eee19b7ec3c1b174")
	exService = &resourcev1.Resource{Attributes: []*commonv1.KeyValue{kv("service.name", str("my.service"))}}
	exScope   = &commonv1.InstrumentationScope{Name: "my.library", Version: "1.0.0"}
)

// The messages testdata/json/*.json must transcode to, written out by hand from the files: the
// expectation of every field is stated here, not derived from another JSON reader.
var exampleTraces = &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
	Resource: &resourcev1.Resource{
		Attributes: []*commonv1.KeyValue{
			kv("service.name", str("my.service")),
			kv("str", str("café \"quoted\"")),
			kv("bool", &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: true}}),
			kv("false", &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: false}}),
			kv("int.string", &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: math.MinInt64}}),
			kv("int.number", &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 42}}),
			kv("double", &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: 1500}}),
			kv("nan", &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: math.NaN()}}),
			kv("inf", &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: math.Inf(-1)}}),
			kv("array", &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{
				Values: []*commonv1.AnyValue{str("a"), {Value: &commonv1.AnyValue_IntValue{IntValue: 7}}, {}},
			}}}),
			kv("kvlist", &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{
				Values: []*commonv1.KeyValue{kv("inner", &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{}})},
			}}}),
			kv("bytes", &commonv1.AnyValue{Value: &commonv1.AnyValue_BytesValue{BytesValue: []byte{0, 1, 2, 255}}}),
			kv("bytes.url.raw", &commonv1.AnyValue{Value: &commonv1.AnyValue_BytesValue{BytesValue: []byte{0, 1, 2, 255}}}),
			{Key: "empty"},
		},
		DroppedAttributesCount: 3,
	},
	ScopeSpans: []*tracev1.ScopeSpans{{
		Scope: &commonv1.InstrumentationScope{Name: "my.library", Version: "1.0.0",
			Attributes: []*commonv1.KeyValue{kv("my.scope.attribute", str("some scope attribute"))}},
		Spans: []*tracev1.Span{
			{
				TraceId: exTraceID, SpanId: exSpanID, Name: "I'm a server span",
				StartTimeUnixNano: 1544712660000000000, EndTimeUnixNano: 1544712661000000000,
				Kind: tracev1.Span_SPAN_KIND_SERVER, Flags: 257, TraceState: "k=v",
				Attributes: []*commonv1.KeyValue{kv("my.span.attr", str("some value"))},
				Events:     []*tracev1.Span_Event{{TimeUnixNano: 1544712660500000000, Name: "event", DroppedAttributesCount: 1}},
				Links:      []*tracev1.Span_Link{{TraceId: exTraceID, SpanId: mustHex("eee19b7ec3c1b173"), Flags: 256}},
				Status:     &tracev1.Status{Code: tracev1.Status_STATUS_CODE_ERROR, Message: "boom"},
			},
			{
				TraceId: exTraceID, SpanId: mustHex("eee19b7ec3c1b175"), ParentSpanId: exSpanID, Name: "client",
				Kind: tracev1.Span_SPAN_KIND_CLIENT, StartTimeUnixNano: 1544712660100000000, DroppedLinksCount: 2,
				Status: &tracev1.Status{},
			},
		},
		SchemaUrl: "https://opentelemetry.io/schemas/1.24.0",
	}},
	SchemaUrl: "https://opentelemetry.io/schemas/1.24.0",
}}}

var exampleMetrics = &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{
	Resource: exService,
	ScopeMetrics: []*metricsv1.ScopeMetrics{{
		Scope: exScope,
		Metrics: []*metricsv1.Metric{
			{Name: "my.counter", Unit: "1", Description: "I am a Counter", Data: &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{
				AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA, IsMonotonic: true,
				DataPoints: []*metricsv1.NumberDataPoint{
					{Value: &metricsv1.NumberDataPoint_AsDouble{AsDouble: 5}, StartTimeUnixNano: 1544712660300000000,
						TimeUnixNano: 1544712660300000000, Attributes: []*commonv1.KeyValue{kv("my.counter.attr", str("some value"))}},
					{Value: &metricsv1.NumberDataPoint_AsInt{AsInt: -3}, TimeUnixNano: 1544712660300000001, Flags: 1},
				},
			}}},
			{Name: "my.gauge", Unit: "1", Description: "I am a Gauge", Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{
				DataPoints: []*metricsv1.NumberDataPoint{{
					Value: &metricsv1.NumberDataPoint_AsDouble{AsDouble: 10}, TimeUnixNano: 1544712660300000000,
					Exemplars: []*metricsv1.Exemplar{{TimeUnixNano: 1544712660300000000, Value: &metricsv1.Exemplar_AsInt{},
						TraceId: exTraceID, SpanId: exSpanID,
						FilteredAttributes: []*commonv1.KeyValue{kv("f", &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: true}})}}},
				}},
			}}},
			{Name: "my.histogram", Unit: "1", Description: "I am a Histogram", Data: &metricsv1.Metric_Histogram{Histogram: &metricsv1.Histogram{
				AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE,
				DataPoints: []*metricsv1.HistogramDataPoint{{
					StartTimeUnixNano: 1544712660300000000, TimeUnixNano: 1544712660300000000, Count: 2, Sum: f64p(0),
					BucketCounts: []uint64{1, 1}, ExplicitBounds: []float64{1}, Min: f64p(0), Max: f64p(math.Inf(1)),
				}},
			}}},
			{Name: "my.exponential.histogram", Unit: "1", Description: "I am an Exponential Histogram",
				Data: &metricsv1.Metric_ExponentialHistogram{ExponentialHistogram: &metricsv1.ExponentialHistogram{
					AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA,
					DataPoints: []*metricsv1.ExponentialHistogramDataPoint{{
						StartTimeUnixNano: 1544712660300000000, TimeUnixNano: 1544712660300000000, Count: 3, Sum: f64p(10),
						Scale: -2, ZeroCount: 1, ZeroThreshold: 1e-9,
						Positive: &metricsv1.ExponentialHistogramDataPoint_Buckets{Offset: -1, BucketCounts: []uint64{0, 2, 300}},
						Negative: &metricsv1.ExponentialHistogramDataPoint_Buckets{},
						Min:      f64p(0), Max: f64p(5),
					}},
				}}},
			{Name: "my.summary", Data: &metricsv1.Metric_Summary{Summary: &metricsv1.Summary{
				DataPoints: []*metricsv1.SummaryDataPoint{{TimeUnixNano: 1, Count: 4, Sum: 2.5,
					QuantileValues: []*metricsv1.SummaryDataPoint_ValueAtQuantile{{Quantile: 0.5, Value: 1}, {Quantile: 1, Value: math.NaN()}}}},
			}}},
			{Name: "no.data"},
		},
	}},
}}}

var exampleLogs = &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{
	Resource: exService,
	ScopeLogs: []*logsv1.ScopeLogs{{
		Scope: exScope,
		LogRecords: []*logsv1.LogRecord{
			{
				TimeUnixNano: 1544712660300000000, ObservedTimeUnixNano: 1544712660300000000,
				SeverityNumber: logsv1.SeverityNumber_SEVERITY_NUMBER_INFO2, SeverityText: "Information",
				TraceId: exTraceID, SpanId: exSpanID, Flags: 1, EventName: "my.event",
				Body: str("Example log record"),
				Attributes: []*commonv1.KeyValue{
					kv("string.attribute", str("some string")),
					kv("map.attribute", &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{
						Values: []*commonv1.KeyValue{kv("some.map.key", str("some value"))}}}}),
					kv("array.attribute", &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{
						Values: []*commonv1.AnyValue{str("many"), {Value: &commonv1.AnyValue_BoolValue{}}}}}}),
				},
			},
			{SeverityNumber: logsv1.SeverityNumber_SEVERITY_NUMBER_FATAL4, Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_BytesValue{}}},
			{},
		},
	}},
}}}

type vtMarshaler interface {
	proto.Message
	MarshalVT() ([]byte, error)
}

// TestJSONExamples transcodes the hand-written requests under testdata/json (every signal,
// every AnyValue kind, every metric type, both key spellings, enum names and numbers, ids in
// both cases, 64-bit integers as strings and numbers) and compares the bytes with the MarshalVT
// encoding of the message written out above, and the Scan with exact counts.
func TestJSONExamples(t *testing.T) {
	tests := []struct {
		file      string
		sig       Signal
		want      vtMarshaler
		resources int
		items     int
	}{
		{"traces.json", Traces, exampleTraces, 1, 2},
		{"metrics.json", Metrics, exampleMetrics, 1, 6},
		{"logs.json", Logs, exampleLogs, 1, 3},
	}
	var tr JSONTranscoder
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "json", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			want, err := tt.want.MarshalVT()
			if err != nil {
				t.Fatal(err)
			}
			got, s, err := tr.AppendRequest(nil, tt.sig, body)
			if err != nil {
				t.Fatalf("AppendRequest: %v", err)
			}
			if !bytes.Equal(got, want) {
				back := tt.want.ProtoReflect().New().Interface()
				_ = proto.Unmarshal(got, back)
				t.Fatalf("bytes differ\ngot:  %x\nwant: %x\ngot decodes to: %v", got, want, back)
			}
			if s != (Scan{Resources: tt.resources, Items: tt.items}) {
				t.Fatalf("Scan %+v, want %d resources, %d items", s, tt.resources, tt.items)
			}
		})
	}
}

// TestJSONSchemaBounds checks what the transcoder's fixed-size state assumes of the schema:
// field numbers below 32 (the per-object bit sets of fields seen and orders written) and no
// name longer than a key unescaped in keyMax bytes can name.
func TestJSONSchemaBounds(t *testing.T) {
	for m := range jsonSchema {
		for _, f := range jsonSchema[m] {
			if f.num >= 32 {
				t.Errorf("message %d field %s: number %d does not fit the bit sets", m, f.name, f.num)
			}
			if 6*max(len(f.name), len(f.camel)) > keyMax {
				t.Errorf("message %d field %s: an escaped key naming it may exceed keyMax", m, f.name)
			}
		}
	}
}
