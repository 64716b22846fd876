//go:build !race

package fastpath

import "testing"

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
				p.AdmitWire(nil, Traces, body, wire, enc, 1)
			}
			// Every tenth request seals a batch and fans it out to two destinations.
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := p.AdmitWire(nil, Traces, body, wire, enc, 1); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("pass-through admit + append + seal + fan-out: %v allocations per run, want 0", allocs)
			}
		})
	}
}
