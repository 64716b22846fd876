package fastpath

import (
	"fmt"
	"testing"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// BenchmarkTenantLookup is what -intake.headers adds to a request of a known tenant before
// admission: its values added to a key and looked up (one and two headers), and with
// -tenant.rate the bucket's take.
func BenchmarkTenantLookup(b *testing.B) {
	for _, c := range []struct {
		name    string
		headers []string
		rate    TenantRate
	}{
		{"one-header", []string{"x-scope-orgid"}, TenantRate{}},
		{"two-headers", []string{"x-scope-orgid", "x-region"}, TenantRate{}},
		{"one-header+rate", []string{"x-scope-orgid"}, TenantRate{PerSecond: 1 << 40, Burst: 1 << 40}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ts, _ := NewTenants(TenantsConfig{Headers: c.headers, Max: 1000, Rate: c.rate})
			vals := [][]byte{[]byte("tenant-0042"), []byte("eu-west-1")}
			for i := range 100 { // a table of a hundred tenants
				var k TenantKey
				for j := range c.headers {
					ts.Add(&k, fmt.Appendf(nil, "%s-%d", vals[j], i))
				}
				ts.Lookup(&k)
			}
			b.ReportAllocs()
			for b.Loop() {
				var k TenantKey
				for j := range c.headers {
					ts.Add(&k, vals[j])
				}
				t, err := ts.Lookup(&k)
				if err != nil {
					b.Fatal(err)
				}
				t.Take(1000, 10)
			}
		})
	}
}

// BenchmarkPipelineAdmitTenants is BenchmarkPipelineAdmit's small v1 case with -intake.headers:
// without tenants, one tenant, and requests of 16 tenants in turns (one open batch each).
func BenchmarkPipelineAdmitTenants(b *testing.B) {
	body, _ := otlpgen.New(1).Spans(otlpgen.Small).MarshalVT()
	for _, n := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.BatchMaxBytes = 4 << 20
			var tenants []*Tenant
			if n > 0 {
				ts, _ := NewTenants(TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 1000})
				cfg.Tenants = ts
				for i := range n {
					var k TenantKey
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
				var t *Tenant
				if n > 0 {
					t = tenants[i%n]
					i++
				}
				if _, err := p.AdmitTenant(t, Traces, body, otlpgen.Small.Spans, LayoutV1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
