package httpserver

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// An OTLP/JSON request as the spec writes it (hex ids, integer enum, int64 as strings) reaches
// the destination as the protobuf encoding of the same message, and is answered {} in JSON.
func TestJSONRequest(t *testing.T) {
	const body = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"web"}}]},
	 "scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b174",
	 "name":"checkout","kind":2,"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":1544712661000000000,"futureField":[1,2]}]}]}]}`
	want := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{Key: "service.name",
			Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "web"}}}}},
		ScopeSpans: []*tracev1.ScopeSpans{{Scope: &commonv1.InstrumentationScope{Name: "s"}, Spans: []*tracev1.Span{{
			TraceId: []byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c},
			SpanId:  []byte{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74},
			Name:    "checkout", Kind: tracev1.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: 1544712660000000000, EndTimeUnixNano: 1544712661000000000,
		}}}},
	}}}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		for _, enc := range []string{"", "gzip", "zstd"} {
			e := start(t, testPipelineConfig(), DefaultConfig(), nil)
			b := []byte(body)
			switch enc {
			case "gzip":
				b = gzipped(t, b)
			case "zstd":
				b = zstded(t, b)
			}
			r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ct, "Content-Encoding": enc}, b)
			if r.status != 200 || string(r.body) != "{}" || r.header.Get("Content-Type") != ctJSON {
				t.Fatalf("%s %s: %d %q %q", ct, enc, r.status, r.header.Get("Content-Type"), r.body)
			}
			e.p.Flush()
			got, items := e.rec.Payload()
			m := &coltracev1.ExportTraceServiceRequest{}
			if err := proto.Unmarshal(got, m); err != nil || !proto.Equal(m, want) || items != 1 {
				t.Errorf("%s %s: destination got %v (%d items), want %v", ct, enc, m, items, want)
			}
		}
	}
}

// Broken JSON is refused whole with 400 and a google.rpc.Status in JSON naming the reason.
func TestJSONMalformed(t *testing.T) {
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	for _, tc := range []struct{ body, msg string }{
		{`{"resourceSpans":[`, "malformed OTLP/JSON request: body is not well-formed JSON"},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`, "malformed OTLP/JSON request: trace or span id is not hex"},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","name":"b"}]}]}]}`, "malformed OTLP/JSON request: JSON object repeats a field"},
		{`[1]`, "malformed OTLP/JSON request: JSON value has the wrong type for its field"},
		// The depth bounds: 100 messages (60 AnyValues nested through arrays under a resource
		// attribute are 124), 300 JSON levels anywhere, unknown keys' values included.
		{`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":` + strings.Repeat(`{"arrayValue":{"values":[`, 60) +
			`{}` + strings.Repeat(`]}}`, 60) + `}]}}]}`, "malformed OTLP/JSON request: messages nested too deep"},
		{`{"x":` + strings.Repeat(`[`, 400) + strings.Repeat(`]`, 400) + `}`, "malformed OTLP/JSON request: body is not well-formed JSON"},
	} {
		r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctJSON}, []byte(tc.body))
		if r.status != 400 || r.header.Get("Content-Type") != ctJSON {
			t.Fatalf("%s: %d %q", tc.body, r.status, r.header.Get("Content-Type"))
		}
		st := &spb.Status{}
		if err := protojson.Unmarshal(r.body, st); err != nil || codes.Code(st.Code) != codes.InvalidArgument || st.Message != tc.msg {
			t.Errorf("%s: %q (%v)", tc.body, r.body, err)
		}
	}
	// An empty request is a success.
	if r := e.do(t, "POST", "/v1/logs", map[string]string{"Content-Type": ctJSON}, []byte(`{}`)); r.status != 200 || string(r.body) != "{}" {
		t.Errorf("empty JSON request: %d %q", r.status, r.body)
	}
	wantNothingReceived(t, e)
}
