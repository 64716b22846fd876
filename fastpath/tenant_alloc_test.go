//go:build !race

package fastpath

import "testing"

// Looking up a known tenant, from header values as an intake reads them or from a spooled
// record, allocates nothing.
func TestTenantLookupZeroAlloc(t *testing.T) {
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	acme := mustLookup(t, ts, "acme", "eu")
	org, region := []byte("acme"), []byte("eu")
	rec := acme.Record()
	allocs := testing.AllocsPerRun(1000, func() {
		var k TenantKey
		ts.Add(&k, org)
		ts.Add(&k, region)
		if got, err := ts.Lookup(&k); err != nil || got != acme {
			t.Fatal(got, err)
		}
		if got, err := ts.FromRecord(rec); err != nil || got != acme {
			t.Fatal(got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("known tenant: %v allocations per lookup, want 0", allocs)
	}
}

// Admission keyed by tenant allocates nothing once each tenant's batch slot exists: requests of
// two tenants and the default one, in turns, sealed and fanned out to the destinations that
// take them.
func TestPipelineTenantsZeroAlloc(t *testing.T) {
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []Match{{Header: "x-scope-orgid", Values: []string{"acme"}}, {}}})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, sink{}, sink{})
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	v1 := entry(3000, 1)
	otep, _ := AppendOTEP(nil, 7, v1)
	for range 100 { // warm the pools and the tenants' slots
		p.AdmitTenant(acme, Traces, v1, 1, LayoutV1)
		p.AdmitTenant(beta, Traces, otep, 1, LayoutOTEP)
		p.Consume(Traces, v1, 1)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := p.AdmitTenant(acme, Traces, v1, 1, LayoutV1); err != nil {
			t.Fatal(err)
		}
		if _, err := p.AdmitTenant(beta, Traces, otep, 1, LayoutOTEP); err != nil {
			t.Fatal(err)
		}
		if err := p.Consume(Traces, v1, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit by tenant + seal + fan-out: %v allocations per run, want 0", allocs)
	}
}
