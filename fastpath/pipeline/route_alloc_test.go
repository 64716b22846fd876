//go:build !race

package pipeline

import (
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Splitting a mixed request by route, admitting its pieces into their batches, sealing and
// handing them out allocates nothing once the pools are warm; nor does a request whose
// entries all go one way, nor filtering a spooled record for a destination.
func TestRoutesZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 30
	cfg.Router = newRouter(t, "resource:service.name=checkout", "resource:service.name=cart|pay*", "")
	p := newTestPipeline(t, cfg, sink{}, sink{}, sink{})
	mixed := routedRequest(t, fastpath.Traces, 5, "checkout", "cart", "payments", "search", "checkout")
	oneWay := routedRequest(t, fastpath.Traces, 5, "search", "ads")
	for range 100 { // warm the pools
		p.Admit(Request{Signal: fastpath.Traces, Body: mixed, Items: 25})
		p.Consume(Request{Signal: fastpath.Traces, Body: oneWay, Items: 10})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: mixed, Items: 25}); err != nil {
			t.Fatal(err)
		}
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: oneWay, Items: 10}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("split + admit + seal + fan-out: %v allocations per run, want 0", allocs)
	}
	rec := slices.Clone(mixed)
	allocs = testing.AllocsPerRun(1000, func() {
		copy(rec, mixed)
		if _, _, err := cfg.Router.Filter(fastpath.Traces, rec, 25, 1, ^uint64(0)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Router.Filter: %v allocations per run, want 0", allocs)
	}
}
