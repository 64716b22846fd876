//go:build !race

package fastpath

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
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

// Stripping odd top-level fields on the way into the batch allocates nothing either.
func TestPipelineStripZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, sink{}, sink{})
	odd := []byte{0x12, 0x00, 0x28, 0x07, 0x3a, 0x03, 'a', 'b', 'c'} // fields 2, 5 and 7
	v1 := append(append(append([]byte{}, odd...), entry(3000, 1)...), odd...)
	otep := append(append([]byte{0x08, 0x07, 0x28, 0x01}, 0x12, 0x02, 0x01, 0x02), odd[2:]...)
	for range 100 { // warm the pools
		p.Consume(Traces, v1, 1)
		p.Admit(Traces, otep, 1, LayoutOTEP)
	}
	before := testutil.ToFloat64(strippedFields.WithLabelValues("traces"))
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Traces, v1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Traces, otep, 1, LayoutOTEP); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit with stripping: %v allocations per run, want 0", allocs)
	}
	// AllocsPerRun runs the function once more to warm up: 1001 runs of 6 + 3 stripped fields.
	if got := testutil.ToFloat64(strippedFields.WithLabelValues("traces")) - before; got != 1001*9 {
		t.Fatalf("stripped fields counted %v, want %d", got, 1001*9)
	}
}
