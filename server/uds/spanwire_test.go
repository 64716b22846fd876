package uds

import (
	"bytes"
	"testing"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// otlpSpans builds the OTLP objects of the converter's spans, field by field, as the reference
// the wire encoder is held to and as what the span tests inspect.
func otlpSpans(c *spanConverter) []*tracev1.Span {
	str := func(r textRef) string { return string(c.bytesOf(r)) }
	id := func(r textRef) []byte {
		if r.len() == 0 {
			return nil
		}
		return bytes.Clone(c.bytesOf(r))
	}
	kvs := func(in []keyValue) []*commonv1.KeyValue {
		var out []*commonv1.KeyValue
		for _, kv := range in {
			v := &commonv1.AnyValue{}
			switch kv.value.kind {
			case anyString:
				v.Value = &commonv1.AnyValue_StringValue{StringValue: str(kv.value.s)}
			case anyBool:
				v.Value = &commonv1.AnyValue_BoolValue{BoolValue: kv.value.i != 0}
			case anyInt:
				v.Value = &commonv1.AnyValue_IntValue{IntValue: kv.value.i}
			case anyDouble:
				v.Value = &commonv1.AnyValue_DoubleValue{DoubleValue: kv.value.d}
			}
			out = append(out, &commonv1.KeyValue{Key: str(kv.key), Value: v})
		}
		return out
	}
	var out []*tracev1.Span
	for _, sp := range c.spans {
		o := &tracev1.Span{
			TraceId: id(sp.traceID), SpanId: id(sp.spanID), ParentSpanId: id(sp.parentID),
			Name: str(sp.name), Kind: tracev1.Span_SpanKind(sp.kind),
			StartTimeUnixNano: sp.start, EndTimeUnixNano: sp.end,
			Attributes: kvs(sp.attrs), DroppedAttributesCount: sp.droppedAttrs,
			DroppedEventsCount: sp.droppedEvents, DroppedLinksCount: sp.droppedLinks,
			Flags: sp.flags,
		}
		for _, ev := range sp.events {
			o.Events = append(o.Events, &tracev1.Span_Event{
				TimeUnixNano: ev.time, Name: str(ev.name),
				Attributes: kvs(ev.attrs), DroppedAttributesCount: ev.dropped,
			})
		}
		for _, l := range sp.links {
			o.Links = append(o.Links, &tracev1.Span_Link{
				TraceId: id(l.traceID), SpanId: id(l.spanID),
				Attributes: kvs(l.attrs), DroppedAttributesCount: l.dropped,
			})
		}
		if sp.status.set {
			o.Status = &tracev1.Status{Code: tracev1.Status_StatusCode(sp.status.code), Message: str(sp.status.message)}
		}
		out = append(out, o)
	}
	return out
}

var wireTestResource = &resourcev1.Resource{Attributes: []*commonv1.KeyValue{
	stringKV("service.name", "svc"), intKV("process.pid", 42),
}}

// checkWire fails unless the encoder writes, for the converter's spans, exactly the bytes
// vtprotobuf marshals from the reference objects.
func checkWire(t testing.TB, c *spanConverter) {
	t.Helper()
	want, err := (&coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource:   wireTestResource,
		ScopeSpans: []*tracev1.ScopeSpans{{Scope: scope, Spans: otlpSpans(c)}},
	}}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, c.requestSize(wireTestResource, scope))
	c.writeRequest(got, wireTestResource, scope)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded request differs from the marshalled one\ngot:  %x\nwant: %x", got, want)
	}
}

// TestSpanWireMatchesMarshal holds the encoder to vtprotobuf's bytes on every TRACE_EXPORT of
// the captures and on hand-made spans with every field the converter fills, converted with one
// reused converter, as the pool reuses them.
func TestSpanWireMatchesMarshal(t *testing.T) {
	payloads := tracePayloads(t)
	payloads = append(payloads,
		[]byte(`[`+with("timeEvents", `[{"time":1.5,"description":"d","attributes":{"x":1}},{"time":2,"type":"SENT","id":3,"uncompressedSize":-5,"compressedSize":"7"},{}]`)+`]`),
		[]byte(`[`+with("links", `[{"traceId":"1","spanId":"2","type":"PARENT","attributes":{"a":[1,{"b":null}],"t":true,"f":false,"d":-1.25e300,"n":null}},{"traceId":"1"}]`)+`]`),
		[]byte(`[`+with("status", `{"code":2,"message":"bad \u00e9"}`)+`,`+with("attributes", `["x",null,3]`)+`,`+with("status", `{"code":0}`)+`]`),
		[]byte(`[`+with("name", `"\ud800 broken"`)+`,`+with("parentSpanId", `"ab"`)+`]`),
	)
	var c spanConverter
	for _, p := range payloads {
		for _, tid := range []uint64{0, 1 << 40} {
			if err := c.convert(p, tid); err != nil {
				t.Fatalf("%.80q: %v", p, err)
			}
			if len(c.spans) == 0 {
				t.Fatalf("%.80q: no spans", p)
			}
			checkWire(t, &c)
		}
	}
}
