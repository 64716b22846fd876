package fastpath_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// splitBenchBatch is an Appendix B small batch (one resource, spans with 4 attributes) whose
// spans belong to traces distinct traces, interleaved.
func splitBenchBatch(tb testing.TB, spans, traces int) []byte {
	req := otlpgen.New(7).Spans(otlpgen.Shape{Spans: spans, Attrs: 4})
	i := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				sp.TraceId = make([]byte, 16)
				binary.BigEndian.PutUint64(sp.TraceId, uint64(i%traces)*0x9e3779b97f4a7c15+1)
				i++
			}
		}
	}
	return mustMarshal(tb, req)
}

// BenchmarkSplit reports the cost of splitting a batch three ways, per span.
func BenchmarkSplit(b *testing.B) {
	for _, c := range []struct{ spans, traces int }{{100, 1}, {100, 10}, {100, 100}, {500, 50}} {
		in := splitBenchBatch(b, c.spans, c.traces)
		b.Run(fmt.Sprintf("spans=%d/traces=%d", c.spans, c.traces), func(b *testing.B) {
			s := fastpath.GetSplitter()
			defer fastpath.PutSplitter(s)
			pick := &modPicker{3}
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := s.Partition(fastpath.Traces, in, fastpath.SplitTraceID, 3, pick); err != nil {
					b.Fatal(err)
				}
				s.ReleaseParts()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.spans), "ns/span")
		})
	}
}
