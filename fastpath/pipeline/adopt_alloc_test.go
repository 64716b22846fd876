//go:build !race

package pipeline

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// Adopting a request's buffer, sealing the batch and handing the exchanged buffer back to the
// pool allocates nothing.
func TestAdmitOwnedZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxItems = 1 // every request seals its batch
	p := newTestPipeline(t, cfg, sink{}, sink{})
	req := entry(60<<10, 1)
	run := func() {
		own := pool.GetBytes(len(req))
		*own = append((*own)[:0], req...)
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: *own, Items: 1, Own: own}); err != nil {
			t.Fatal(err)
		}
		pool.PutBytes(own)
	}
	for range 100 { // warm the pools
		run()
	}
	before := testutil.ToFloat64(adoptedBytes)
	allocs := testing.AllocsPerRun(1000, run)
	if allocs != 0 {
		t.Fatalf("adopt + seal + fan-out: %v allocations per run, want 0", allocs)
	}
	if got := testutil.ToFloat64(adoptedBytes) - before; got < 1000*float64(len(req)) {
		t.Fatalf("adopted %v bytes in 1001 runs of %d, want every request adopted", got, len(req))
	}
}
