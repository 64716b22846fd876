package pipeline

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

func BenchmarkPipelineAdmit(b *testing.B) {
	for _, c := range []struct {
		name  string
		shape otlpgen.Shape
	}{{"small", otlpgen.Small}, {"large", otlpgen.Large}} {
		body, _ := otlpgen.New(1).Spans(c.shape).MarshalVT()
		otep, _ := fastpath.AppendOTEP(nil, 1, body)
		for _, l := range []struct {
			name   string
			req    []byte
			layout fastpath.Layout
		}{{"v1", body, fastpath.LayoutV1}, {"otep", otep, fastpath.LayoutOTEP}} {
			b.Run(c.name+"/"+l.name, func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.BatchMaxBytes = 4 << 20
				p, _ := New(cfg, []Destination{sink{}, sink{}})
				defer p.Close()
				b.SetBytes(int64(len(l.req)))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: l.req, Items: c.shape.Spans, Layout: l.layout}); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}
