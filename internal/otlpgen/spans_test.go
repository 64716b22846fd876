package otlpgen

import (
	"bytes"
	"testing"
)

func TestSpansShape(t *testing.T) {
	for _, s := range []Shape{Small, Large} {
		req := New(1).Spans(s)
		if n := len(req.ResourceSpans); n != 1 {
			t.Fatalf("resources = %d, want 1", n)
		}
		spans := req.ResourceSpans[0].ScopeSpans[0].Spans
		if len(spans) != s.Spans {
			t.Fatalf("spans = %d, want %d", len(spans), s.Spans)
		}
		seen := map[string]bool{}
		for i, sp := range spans {
			if len(sp.TraceId) != 16 || len(sp.SpanId) != 8 {
				t.Fatalf("span %d: id lengths %d/%d", i, len(sp.TraceId), len(sp.SpanId))
			}
			if seen[string(sp.SpanId)] {
				t.Fatalf("span %d: duplicate span id", i)
			}
			seen[string(sp.SpanId)] = true
			if len(sp.Attributes) != s.Attrs {
				t.Fatalf("span %d: %d attributes, want %d", i, len(sp.Attributes), s.Attrs)
			}
			if sp.Attributes[0].Value.GetIntValue() != int64(i+1) {
				t.Fatalf("span %d: span_seq_num = %d", i, sp.Attributes[0].Value.GetIntValue())
			}
			for _, kv := range sp.Attributes[2:] {
				if l := len(kv.Key); l < 1 || l > 50 {
					t.Fatalf("key length %d", l)
				}
				if l := len(kv.Value.GetStringValue()); l < 1 || l > 20 {
					t.Fatalf("value length %d", l)
				}
			}
		}
	}
}

func TestSpansDeterministic(t *testing.T) {
	a, _ := New(7).Spans(Small).MarshalVT()
	b, _ := New(7).Spans(Small).MarshalVT()
	c, _ := New(8).Spans(Small).MarshalVT()
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different bytes")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same bytes")
	}
}

// Every letter of the alphabet appears, with roughly equal frequency.
func TestStrUniform(t *testing.T) {
	g := New(3)
	counts := map[byte]int{}
	for range 2000 {
		for _, c := range []byte(g.str(50)) {
			counts[c]++
		}
	}
	if len(counts) != len(letters) {
		t.Fatalf("%d distinct letters, want %d", len(counts), len(letters))
	}
	for c, n := range counts {
		if n < 100_000/64/2 || n > 100_000/64*2 {
			t.Errorf("letter %q appears %d times of 100000", c, n)
		}
	}
}

// With Traces set, the spans of a batch are dealt out to that many trace ids, span by span,
// and no trace id repeats across batches.
func TestSpansTraces(t *testing.T) {
	g := New(1)
	seen := map[string]int{}
	for b := range 2 {
		spans := g.Spans(Shape{Spans: 7, Attrs: 2, Traces: 3}).ResourceSpans[0].ScopeSpans[0].Spans
		for i, sp := range spans {
			if want := spans[i%3].TraceId; string(sp.TraceId) != string(want) {
				t.Errorf("batch %d span %d: trace %x, want %x", b, i, sp.TraceId, want)
			}
			seen[string(sp.TraceId)]++
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d distinct trace ids in two batches of three traces, want 6", len(seen))
	}
}
