package conformance

import (
	"bytes"
	"strings"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcoltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rcommon "go.opentelemetry.io/proto/otlp/common/v1"
	rtrace "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestWirePath checks that a byte mismatch is reported at the field that holds it, which is
// what makes a failing seed readable.
func TestWirePath(t *testing.T) {
	req := &rcoltrace.ExportTraceServiceRequest{ResourceSpans: []*rtrace.ResourceSpans{
		{SchemaUrl: "first"},
		{ScopeSpans: []*rtrace.ScopeSpans{{Spans: []*rtrace.Span{
			{Name: "a"},
			{Name: "second", Attributes: []*rcommon.KeyValue{
				{Key: "k", Value: &rcommon.AnyValue{Value: &rcommon.AnyValue_IntValue{IntValue: 7}}},
			}},
		}}}},
	}}
	b, err := deterministic.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	md := req.ProtoReflect().Descriptor()
	at := func(sub []byte, skip int) int {
		i := bytes.Index(b, sub)
		if i < 0 {
			t.Fatalf("% x not in % x", sub, b)
		}
		return i + skip
	}
	cases := []struct {
		off  int
		want string
	}{
		{0, "resource_spans[0]"},
		{1, "resource_spans[0].(length)"},
		{at([]byte("first"), 0), "resource_spans[0].schema_url"},
		{at([]byte("second"), 3), "resource_spans[1].scope_spans[0].spans[1].name"},
		{at([]byte{0x18, 0x07}, 1), "resource_spans[1].scope_spans[0].spans[1].attributes[0].value.int_value"},
		{len(b), "(past the end)"},
	}
	for _, c := range cases {
		if got := wirePath(md, b, c.off); got != c.want {
			t.Errorf("wirePath at %d = %q, want %q", c.off, got, c.want)
		}
	}
	if got := wirePath(nil, b, 0); got != "#1" {
		t.Errorf("wirePath without a descriptor = %q, want #1", got)
	}

	changed := bytes.Clone(b)
	changed[at([]byte("second"), 3)] = 'X'
	err = sameBytes("test", md, changed, b)
	if err == nil || !strings.Contains(err.Error(), "spans[1].name") {
		t.Fatalf("sameBytes = %v, want a mismatch in spans[1].name", err)
	}
	if err := sameBytes("test", md, b, bytes.Clone(b)); err != nil {
		t.Fatalf("sameBytes on equal bytes: %v", err)
	}
}
