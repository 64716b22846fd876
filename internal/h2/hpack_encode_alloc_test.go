//go:build !race

package h2

import "testing"

func TestPrecomputedHeadersAppendAllocs(t *testing.T) {
	f, err := NewHeadersFrame(true, GRPCTrailersOK...)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		buf = f.Append(buf[:0], 3)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}
