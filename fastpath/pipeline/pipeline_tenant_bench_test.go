package pipeline

import (
	"fmt"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// BenchmarkPipelineAdmitTenants is BenchmarkPipelineAdmit's small v1 case with -intake.headers:
// without tenants, one tenant, and requests of 16 tenants in turns (one open batch each).
func BenchmarkPipelineAdmitTenants(b *testing.B) {
	body, _ := otlpgen.New(1).Spans(otlpgen.Small).MarshalVT()
	for _, n := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.BatchMaxBytes = 4 << 20
			var tenants []*tenant.Tenant
			if n > 0 {
				ts, _ := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 1000})
				cfg.Tenants = ts
				for i := range n {
					var k tenant.Key
					ts.AddString(&k, fmt.Sprint("t", i))
					t, _ := ts.Lookup(&k)
					tenants = append(tenants, t)
				}
			}
			p, _ := New(cfg, []Destination{sink{}, sink{}})
			defer p.Close()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var t *tenant.Tenant
				if n > 0 {
					t = tenants[i%n]
					i++
				}
				if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: t}, Body: body, Items: otlpgen.Small.Spans}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
