//go:build !race

package process

import (
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Splitting a mixed request into its pieces, a request whose entries go one way, and
// filtering a spooled record for a destination allocate nothing once the pools are warm.
func TestSplitZeroAlloc(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout", "resource:service.name=cart|pay*", "")
	mixed := routedRequest(t, fastpath.Traces, 5, "checkout", "cart", "payments", "search", "checkout")
	oneWay := routedRequest(t, fastpath.Traces, 5, "search", "ads")
	run := func() {
		for _, req := range [][]byte{mixed, oneWay} {
			s, err := split(rt, fastpath.Traces, req, 25, fastpath.LayoutV1)
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
		}
	}
	for range 100 { // warm the pools
		run()
	}
	if allocs := testing.AllocsPerRun(1000, run); allocs != 0 {
		t.Fatalf("Split: %v allocations per run, want 0", allocs)
	}
	rec := slices.Clone(mixed)
	allocs := testing.AllocsPerRun(1000, func() {
		copy(rec, mixed)
		if _, _, err := rt.Filter(fastpath.Traces, rec, 25, 1, ^uint64(0)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Filter: %v allocations per run, want 0", allocs)
	}
}
