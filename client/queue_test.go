package client

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The retry heap pops in order of due, also after fix re-ordered it when some dues moved
// (queue.releaseOutage making them due at once).
func TestDelayHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var h delayHeap
		var dues []int64
		for range 1 + rng.IntN(40) {
			r := &request{due: rng.Int64N(1000)}
			h.push(r)
		}
		for _, r := range h {
			if rng.IntN(3) == 0 {
				r.due = -int64(round) // released: due at once
			}
			dues = append(dues, r.due)
		}
		h.fix()
		slices.Sort(dues)
		var got []int64
		for len(h) > 0 {
			got = append(got, h.pop().due)
		}
		if !slices.Equal(got, dues) {
			t.Fatalf("round %d: popped %v, want %v", round, got, dues)
		}
	}
}
