package otlpgen

import (
	"encoding/binary"
	"math/rand/v2"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// Shape is the size of one batch.
type Shape struct {
	Spans int // spans per batch
	Attrs int // attributes per span
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

// Spans returns a trace export request of one resource with s.Spans spans, built like the
// reference load generator: one trace id per batch (16 bytes), a span id per span (8 bytes), the
// first two attributes int64 sequence numbers and the rest strings with random 1-50 character
// keys and 1-20 character values.
func (g *Generator) Spans(s Shape) *coltracev1.ExportTraceServiceRequest {
	g.traceSeq++
	traceID := make([]byte, 16)
	binary.BigEndian.PutUint64(traceID[8:], g.traceSeq)
	spans := make([]*tracev1.Span, s.Spans)
	for i := range spans {
		g.spanSeq++
		spanID := make([]byte, 8)
		binary.BigEndian.PutUint64(spanID, g.spanSeq)
		sp := &tracev1.Span{
			TraceId:           traceID,
			SpanId:            spanID,
			Name:              "load-generator-span",
			Kind:              tracev1.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: baseTime,
			EndTimeUnixNano:   baseTime + uint64(i)*1e6,
			Attributes:        make([]*commonv1.KeyValue, 0, s.Attrs),
		}
		if s.Attrs >= 2 {
			sp.Attributes = append(sp.Attributes,
				intAttr("load_generator.span_seq_num", int64(g.spanSeq)),
				intAttr("load_generator.trace_seq_num", int64(g.traceSeq)))
		}
		for len(sp.Attributes) < s.Attrs {
			k := g.str(1 + g.rnd.IntN(50))
			v := g.str(1 + g.rnd.IntN(20))
			sp.Attributes = append(sp.Attributes, &commonv1.KeyValue{
				Key:   k,
				Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}},
			})
		}
		spans[i] = sp
	}
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{
			{Key: "StartTimeUnixnano", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: int64(baseTime)}}},
			{Key: "load_generator.batch_seq_num", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: int64(g.traceSeq)}}},
		}},
		ScopeSpans: []*tracev1.ScopeSpans{{
			Scope: &commonv1.InstrumentationScope{Name: "otlpgen"},
			Spans: spans,
		}},
	}}}
}

func intAttr(k string, v int64) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: v}}}
}

const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."

func (g *Generator) str(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[g.rnd.IntN(len(letters))]
	}
	return string(b)
}
