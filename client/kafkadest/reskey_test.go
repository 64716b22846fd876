package kafkadest

import (
	"bytes"
	"math"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

func strV(s string) *commonv1.AnyValue {
	return &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: s}}
}

func kv(k string, v *commonv1.AnyValue) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: v}
}

// resourceKeyCases are resources of every kind of attribute value, in every order, nested,
// repeated and empty.
func resourceKeyCases() map[string][]*commonv1.KeyValue {
	nested := &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{Values: []*commonv1.KeyValue{
		kv("z", strV("last")), kv("a", &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: -7}}),
		kv("m", &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{Values: []*commonv1.KeyValue{
			kv("y", strV("deep")), kv("b", strV("deeper"))}}}}),
		kv("e", &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{}}}),
	}}}}
	list := &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{Values: []*commonv1.AnyValue{
		strV("x"), {Value: &commonv1.AnyValue_BoolValue{BoolValue: true}}, {}, nested,
		{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{}}}}}}}
	return map[string][]*commonv1.KeyValue{
		"none":      nil,
		"service":   {kv("service.name", strV("checkout"))},
		"unsorted":  {kv("service.name", strV("checkout")), kv("host.name", strV("node-1")), kv("a", strV(""))},
		"reordered": {kv("a", strV("")), kv("service.name", strV("checkout")), kv("host.name", strV("node-1"))},
		"scalars": {
			kv("bool.true", &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: true}}),
			kv("bool.false", &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: false}}),
			kv("int", &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: math.MinInt64}}),
			kv("int.big", &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 1 << 40}}),
			kv("double", &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: -2.5}}),
			kv("double.nan", &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: math.Inf(1)}}),
			kv("bytes", &commonv1.AnyValue{Value: &commonv1.AnyValue_BytesValue{BytesValue: []byte{0, 0xff, 0xf4}}}),
			kv("empty", &commonv1.AnyValue{}),
			kv("absent", nil),
			kv("unicode ключ", strV("значение")),
		},
		"nested":   {kv("map", nested), kv("list", list), kv("k8s.pod.uid", strV("0f0e"))},
		"repeated": {kv("dup", strV("first")), kv("other", strV("o")), kv("dup", strV("second")), kv("dup", strV("third"))},
		"prefixes": {kv("ab", strV("1")), kv("a", strV("2")), kv("abc", strV("3")), kv("", strV("empty key"))},
	}
}

// The key of a resource's records with partition=resource is the Collector's own: for each
// resource, the 16 bytes pdatautil.MapHash (the Collector's code, imported) gives the
// attributes pdata decodes from the same bytes, which is the key its Kafka exporter's
// partition_{metrics,logs}_by_resource_attributes sets.
func TestResourceKeyIsCollectors(t *testing.T) {
	for name, attrs := range resourceKeyCases() {
		t.Run(name, func(t *testing.T) {
			req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
				Resource:   &resourcev1.Resource{Attributes: attrs},
				ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "op"}}}},
			}}}
			raw, err := req.MarshalVT()
			if err != nil {
				t.Fatal(err)
			}
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := pdatautil.MapHash(td.ResourceSpans().At(0).Resource().Attributes())

			var k resourceKeyer
			entry := firstEntry(t, raw)
			for range 2 { // and again with the scratch space of the first
				got, err := k.key(entry)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("key %x, the Collector's %x", got, want)
				}
			}
		})
	}
}

// A resource sent twice in an entry merges, attributes and all, as pdata decodes it.
func TestResourceKeyMergedResource(t *testing.T) {
	one := &resourcev1.Resource{Attributes: []*commonv1.KeyValue{kv("b", strV("2"))}}
	two := &resourcev1.Resource{Attributes: []*commonv1.KeyValue{kv("a", strV("1"))}}
	var entry []byte
	for _, r := range []*resourcev1.Resource{one, two} {
		b, err := r.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		entry = protowire.AppendBytes(protowire.AppendTag(entry, fEntryResource, protowire.BytesType), b)
	}
	raw := protowire.AppendBytes(protowire.AppendTag(nil, fEntry, protowire.BytesType), entry)
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := pdatautil.MapHash(td.ResourceSpans().At(0).Resource().Attributes())
	var k resourceKeyer
	got, err := k.key(entry)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || td.ResourceSpans().At(0).Resource().Attributes().Len() != 2 {
		t.Fatalf("key %x, the Collector's %x (%d attributes)", got, want, td.ResourceSpans().At(0).Resource().Attributes().Len())
	}
}

// firstEntry is the body of the first resource entry of req.
func firstEntry(t *testing.T, req []byte) []byte {
	t.Helper()
	it := fastpath.NewTopLevel(req)
	f, ok := it.Next()
	if !ok || f.Num != fEntry {
		t.Fatalf("no resource entry: %v", it.Err())
	}
	return req[f.Value:f.End]
}
