//go:build !race

package process

import "testing"

// Every step, and all of them together, runs on a request without allocating.
func TestStepsAllocateNothing(t *testing.T) {
	req := benchRequest(t, 2)
	dst := make([]byte, 0, 2*len(req))
	for _, sc := range stepConfigs {
		c := mustChain(t, sc.cfg)
		if _, err := run(c, sigTraces, req, dst); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() {
			if _, err := run(c, sigTraces, req, dst); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per request", sc.name, n)
		}
	}
}
