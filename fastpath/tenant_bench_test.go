package fastpath

import (
	"fmt"
	"testing"
	"time"

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
				if _, err := p.AdmitTenant(Origin{Tenant: t}, Traces, body, otlpgen.Small.Spans, LayoutV1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTenantInsert is the cost of a new tenant in a table that already holds `table`
// tenants: each op interns a tuple never seen before (the table grows by b.N from there).
// Reported per new tenant; it should not grow with the table.
func BenchmarkTenantInsert(b *testing.B) {
	for _, n := range []int{100, 1000, 10000, 50000} {
		b.Run(fmt.Sprintf("table=%d", n), func(b *testing.B) {
			ts, _ := NewTenants(TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: maxTenants})
			var k TenantKey
			for i := range n - 1 {
				k.Reset()
				ts.Add(&k, fmt.Appendf(nil, "warm-%07d", i))
				if _, err := ts.Lookup(&k); err != nil {
					b.Fatal(err)
				}
			}
			names := make([][]byte, 0, 1<<16)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%len(names[:cap(names)]) == 0 {
					b.StopTimer()
					names = names[:0]
					for j := range cap(names) {
						names = append(names, fmt.Appendf(nil, "new-%08d", i+j))
					}
					b.StartTimer()
				}
				k.Reset()
				ts.Add(&k, names[i%cap(names)])
				i++
				if _, err := ts.Lookup(&k); err != nil {
					b.Fatal(err)
				}
				if ts.Len() >= maxTenants-1 {
					b.Fatal("the benchmark filled the table")
				}
			}
		})
	}
}

// BenchmarkTenantRefusedFull is the cost of a request with a new value at a full table of
// busy tenants (-intake.tenant-idle on): refused, without walking the table each time.
func BenchmarkTenantRefusedFull(b *testing.B) {
	const n = 20000
	ts, _ := NewTenants(TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: n, Idle: time.Hour})
	for i := range n - 1 {
		var k TenantKey
		ts.Add(&k, fmt.Appendf(nil, "busy-%06d", i))
		if _, err := ts.Lookup(&k); err != nil {
			b.Fatal(err)
		}
	}
	v := []byte("new-000000")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		copy(v[4:], fmt.Appendf(v[:4], "%06d", i%1000000)[4:])
		i++
		var k TenantKey
		ts.Add(&k, v)
		if _, err := ts.Lookup(&k); err != ErrTooManyTenants {
			b.Fatal(err)
		}
	}
}
