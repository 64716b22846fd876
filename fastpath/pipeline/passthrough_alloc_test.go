//go:build !race

package pipeline

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Admitting a compressed request into a pass-through batch, sealing it and handing it out
// allocates nothing, for either encoding.
func TestPassThroughZeroAlloc(t *testing.T) {
	for _, enc := range []Encoding{EncodingGzip, EncodingZstd} {
		t.Run(enc.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.BatchMaxItems = 10
			p := newTestPipeline(t, cfg, wireSink{enc}, wireSink{enc})
			body := entry(3000, 1)
			wire := compressTo(t, enc, body)
			for range 100 { // warm the pools
				p.Admit(Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: wire, Encoding: enc})
			}
			// Every tenth request seals a batch and fans it out to two destinations.
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: wire, Encoding: enc}); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("pass-through admit + append + seal + fan-out: %v allocations per run, want 0", allocs)
			}
		})
	}
}

// A tenant's compressed request passes through allocating nothing either, once its batch slot
// exists: two tenants' and the default tenant's requests in turns, each into a pass-through
// batch of its own, sealed and fanned out to the destinations of its match-header.
func TestPassThroughTenantsZeroAlloc(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}, {}}})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, wireSink{EncodingGzip}, wireSink{EncodingGzip})
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	body := entry(3000, 1)
	wire := compressTo(t, EncodingGzip, body)
	passed := testutil.ToFloat64(passRequestsC[1])
	step := func() {
		for _, tn := range []*tenant.Tenant{acme, beta, nil} {
			if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: body, Items: 1, Wire: wire, Encoding: EncodingGzip}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 100 { // warm the pools and the tenants' slots
		step()
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("tenants' pass-through admit + seal + fan-out: %v allocations per run, want 0", allocs)
	}
	if d := testutil.ToFloat64(passRequestsC[1]) - passed; d != 3*1101 {
		t.Fatalf("%v requests passed through, want %d", d, 3*1101)
	}
}
