package otlpgen

import (
	"encoding/binary"
	"math/rand/v2"
	"unsafe"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// Shape is the size of one batch.
type Shape struct {
	Spans int // spans per batch
	Attrs int // attributes per span
	// Traces is how many traces the spans of a batch belong to, interleaved span by span (as
	// an SDK's batch of concurrent requests); 0 or 1: the whole batch is one trace.
	Traces int
	// Semconv makes the spans those of an HTTP server instrumentation (see Semconv) instead of
	// the reference generator's; Attrs is then ignored.
	Semconv bool
}

// The two batch shapes of Appendix B.
var (
	Small = Shape{Spans: 100, Attrs: 4}
	Large = Shape{Spans: 500, Attrs: 10}
)

// Generator makes span batches. Trace and span sequence numbers grow across batches, so every
// span of a run has a distinct span id and every batch its own trace id.
type Generator struct {
	rnd      *rand.Rand
	traceSeq uint64
	spanSeq  uint64
}

// New returns a generator whose random attribute names and values follow seed.
func New(seed uint64) *Generator {
	return &Generator{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// baseTime is a fixed start so that batches of equal seed are byte-identical.
const baseTime = uint64(1572516672_000000013) // 2019-10-31T10:11:12.000000013Z

// Spans returns a trace export request of one resource with s.Spans spans (with s.Semconv, see
// Semconv; otherwise as follows), built like the
// reference load generator: one trace id per batch (16 bytes; s.Traces of them, dealt out span
// by span, when set), a span id per span (8 bytes), the first two attributes int64 sequence
// numbers and the rest strings with random 1-50 character keys and 1-20 character values.
//
// The objects of a batch are carved from a few slabs, and its strings from one arena, rather
// than allocated one by one: the generator runs inside the benchmarks' timed loops, where its
// allocations would otherwise weigh more than the code under test.
func (g *Generator) Spans(s Shape) *coltracev1.ExportTraceServiceRequest {
	if s.Semconv {
		return g.semconvSpans(s)
	}
	nTraces := max(s.Traces, 1)
	traceIDs := make([]byte, 16*nTraces)
	for t := range nTraces {
		g.traceSeq++
		binary.BigEndian.PutUint64(traceIDs[16*t+8:], g.traceSeq)
	}
	nStr := max(s.Attrs-2, 0)
	if s.Attrs < 2 {
		nStr = s.Attrs
	}
	var (
		spans    = make([]tracev1.Span, s.Spans)
		ptrs     = make([]*tracev1.Span, s.Spans)
		kvs      = make([]commonv1.KeyValue, s.Spans*s.Attrs)
		kvPtrs   = make([]*commonv1.KeyValue, s.Spans*s.Attrs)
		vals     = make([]commonv1.AnyValue, s.Spans*s.Attrs)
		ints     = make([]commonv1.AnyValue_IntValue, s.Spans*2)
		strs     = make([]commonv1.AnyValue_StringValue, s.Spans*nStr)
		spanIDs  = make([]byte, 8*s.Spans)
		arena    = make([]byte, 0, s.Spans*nStr*72)
		kvi, ii  int
		stringsI int
	)
	for i := range spans {
		g.spanSeq++
		spanID := spanIDs[8*i : 8*i+8 : 8*i+8]
		binary.BigEndian.PutUint64(spanID, g.spanSeq)
		sp := &spans[i]
		t := i % nTraces
		sp.TraceId = traceIDs[16*t : 16*t+16 : 16*t+16]
		sp.SpanId = spanID
		sp.Name = "load-generator-span"
		sp.Kind = tracev1.Span_SPAN_KIND_CLIENT
		sp.StartTimeUnixNano = baseTime
		sp.EndTimeUnixNano = baseTime + uint64(i)*1e6
		sp.Attributes = kvPtrs[kvi : kvi : kvi+s.Attrs]
		// add appends an attribute with key and returns its value to fill.
		add := func(key string) *commonv1.AnyValue {
			kv := &kvs[kvi]
			kv.Key = key
			kv.Value = &vals[kvi]
			kvPtrs[kvi] = kv
			sp.Attributes = sp.Attributes[:len(sp.Attributes)+1]
			kvi++
			return kv.Value
		}
		if s.Attrs >= 2 {
			ints[ii].IntValue = int64(g.spanSeq)
			add("load_generator.span_seq_num").Value = &ints[ii]
			ints[ii+1].IntValue = int64(g.traceSeq)
			add("load_generator.trace_seq_num").Value = &ints[ii+1]
			ii += 2
		}
		for len(sp.Attributes) < s.Attrs {
			var k string
			k, arena = g.appendStr(arena, 1+g.rnd.IntN(50))
			sv := &strs[stringsI]
			sv.StringValue, arena = g.appendStr(arena, 1+g.rnd.IntN(20))
			stringsI++
			add(k).Value = sv
		}
		ptrs[i] = sp
	}
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{
			{Key: "StartTimeUnixnano", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: int64(baseTime)}}},
			{Key: "load_generator.batch_seq_num", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: int64(g.traceSeq)}}},
		}},
		ScopeSpans: []*tracev1.ScopeSpans{{
			Scope: &commonv1.InstrumentationScope{Name: "otlpgen"},
			Spans: ptrs,
		}},
	}}}
}

// letters has 64 characters, so six random bits pick one uniformly.
const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."

// appendStr appends n uniformly random letters to arena and returns them as a string that
// shares arena's memory, which is never written again. Ten letters come from one 64-bit draw: a
// draw per character made the generator the largest cost of the benchmarks' timed loops.
func (g *Generator) appendStr(arena []byte, n int) (string, []byte) {
	if cap(arena)-len(arena) < n {
		arena = make([]byte, 0, max(4096, n)) // the strings already made keep the old arena alive
	}
	start := len(arena)
	arena = arena[:start+n]
	b := arena[start:]
	for i := 0; i < n; i += 10 {
		r := g.rnd.Uint64()
		for j := i; j < min(i+10, n); j++ {
			b[j] = letters[r&63]
			r >>= 6
		}
	}
	return unsafe.String(&b[0], n), arena
}

// str returns n random letters (tests).
func (g *Generator) str(n int) string {
	s, _ := g.appendStr(nil, n)
	return s
}
