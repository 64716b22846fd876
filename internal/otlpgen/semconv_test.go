package otlpgen

import (
	"bytes"
	"strings"
	"testing"
)

// A semconv batch is 1000 server spans of about 800 bytes on the wire, each with the HTTP
// attributes of the semantic conventions, and the same seed makes the same bytes.
func TestSemconvShape(t *testing.T) {
	req := New(1).Spans(Semconv)
	b, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	spans := req.ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != 1000 {
		t.Fatalf("spans = %d, want 1000", len(spans))
	}
	if per := len(b) / len(spans); per < 750 || per > 900 {
		t.Errorf("%d bytes per span, want about 800", per)
	}
	errors := 0
	for i, sp := range spans {
		if len(sp.TraceId) != 16 || len(sp.SpanId) != 8 || len(sp.ParentSpanId) != 8 {
			t.Fatalf("span %d: id lengths %d/%d/%d", i, len(sp.TraceId), len(sp.SpanId), len(sp.ParentSpanId))
		}
		if len(sp.Attributes) != semconvAttrs {
			t.Fatalf("span %d: %d attributes, want %d", i, len(sp.Attributes), semconvAttrs)
		}
		if k := sp.Attributes[0].Key; k != "http.request.method" {
			t.Fatalf("span %d: first attribute %q", i, k)
		}
		if !strings.HasPrefix(sp.Name, sp.Attributes[0].Value.GetStringValue()+" /") {
			t.Fatalf("span %d: name %q does not start with its method", i, sp.Name)
		}
		if sp.Status != nil {
			errors++
			if len(sp.Events) != 1 || sp.Events[0].Name != "exception" {
				t.Fatalf("span %d: an error without its exception event", i)
			}
		}
	}
	if errors == 0 || errors > 200 {
		t.Errorf("%d spans of 1000 failed, want a few", errors)
	}
	again, _ := New(1).Spans(Semconv).MarshalVT()
	if !bytes.Equal(b, again) {
		t.Fatal("same seed gave different bytes")
	}
}
