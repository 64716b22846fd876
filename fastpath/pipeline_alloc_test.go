//go:build !race

package fastpath

import (
	"testing"
)

func TestPipelineZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, sink{}, sink{}, sink{})
	v1 := entry(3000, 1)
	otep, _ := AppendOTEP(nil, 7, v1)
	for range 100 { // warm the pools
		p.Consume(Traces, v1, 1)
		p.Admit(Traces, otep, 1, LayoutOTEP)
	}
	// Every tenth request seals a batch and fans it out to three destinations.
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Traces, v1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Traces, otep, 1, LayoutOTEP); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit + append + seal + fan-out: %v allocations per run, want 0", allocs)
	}
}
