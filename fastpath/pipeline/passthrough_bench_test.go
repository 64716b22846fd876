package pipeline

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// BenchmarkPassThroughAdmit admits a compressed request of the Appendix B shapes into a
// pass-through batch (check, append, seal, fan-out to two destinations); BenchmarkPipelineAdmit
// is the plain path's figure. The tenant cases admit it for a tenant (-intake.headers), into
// that tenant's pass-through batch. Bytes are the decompressed request's.
func BenchmarkPassThroughAdmit(b *testing.B) {
	for _, c := range []struct {
		name  string
		shape otlpgen.Shape
	}{{"small", otlpgen.Small}, {"large", otlpgen.Large}} {
		body, _ := otlpgen.New(1).Spans(c.shape).MarshalVT()
		for _, enc := range []Encoding{EncodingGzip, EncodingZstd} {
			wire := compressTo(b, enc, body)
			for _, withTenant := range []bool{false, true} {
				name := c.name + "/" + enc.String()
				if withTenant {
					name += "/tenant"
				}
				b.Run(name, func(b *testing.B) {
					cfg := DefaultConfig()
					cfg.BatchMaxBytes = 4 << 20
					var tn *tenant.Tenant
					if withTenant {
						ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
						if err != nil {
							b.Fatal(err)
						}
						cfg.Tenants = ts
						var k tenant.Key
						ts.AddString(&k, "acme")
						if tn, err = ts.Lookup(&k); err != nil {
							b.Fatal(err)
						}
					}
					p, _ := New(cfg, []Destination{wireSink{enc}, wireSink{enc}})
					defer p.Close()
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: body, Items: c.shape.Spans, Wire: wire, Encoding: enc}); err != nil {
								b.Fatal(err)
							}
						}
					})
				})
			}
		}
	}
}
