//go:build !race

package pipeline

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Admission keyed by tenant allocates nothing once each tenant's batch slot exists: requests of
// two tenants and the default one, in turns, sealed and fanned out to the destinations that
// take them.
func TestPipelineTenantsZeroAlloc(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}, {}}})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, sink{}, sink{})
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	v1 := entry(3000, 1)
	otep, _ := fastpath.AppendOTEP(nil, 7, v1)
	for range 100 { // warm the pools and the tenants' slots
		p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: acme}, Body: v1, Items: 1})
		p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: beta}, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP})
		p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: acme}, Body: v1, Items: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: beta}, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP}); err != nil {
			t.Fatal(err)
		}
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit by tenant + seal + fan-out: %v allocations per run, want 0", allocs)
	}
}
