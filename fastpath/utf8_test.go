package fastpath_test

import (
	"errors"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// Strings must be UTF-8 at DepthFull, as protobuf-go requires; bytes fields (ids, bytes_value)
// may hold anything; shallower depths do not look.
func TestScanUTF8(t *testing.T) {
	// pattern, repeated, fills the trace id and the span id.
	req := func(name, attr string, pattern []byte) []byte {
		var tid, sid []byte
		if len(pattern) > 0 {
			for len(tid) < 16 {
				tid = append(tid, pattern...)
			}
			tid, sid = tid[:16], tid[:8]
		}
		b, err := (&coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
				Name: name, TraceId: tid, SpanId: sid,
				Attributes: []*commonv1.KeyValue{{Key: "k", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: attr}}}},
			}}}},
		}}}).MarshalVT() // MarshalVT does not check UTF-8: it lets the test build bad input
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		full error
	}{
		{"valid", req("ok ✓", "v", []byte{0xff, 0xfe}), nil},
		{"bad span name", req("bad \xff", "v", nil), fastpath.ErrUTF8},
		{"bad attribute value", req("ok", "\xc3\x28", nil), fastpath.ErrUTF8},
		{"bad bytes in ids are bytes", req("ok", "v", []byte{0xc3, 0x28, 0xff}), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := fastpath.ScanRequest(fastpath.Traces, c.b, fastpath.LayoutV1, fastpath.DepthFull); !errors.Is(err, c.full) {
				t.Fatalf("DepthFull: %v, want %v", err, c.full)
			}
			if sc, err := fastpath.ScanRequest(fastpath.Traces, c.b, fastpath.LayoutV1, fastpath.DepthResource); err != nil || sc.Items != 1 {
				t.Fatalf("DepthResource: %+v, %v", sc, err)
			}
		})
	}
}
