//go:build !race

package fastpath_test

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Splitting a batch, from the walk to the pooled parts and their release, allocates nothing
// once the splitter's scratch space and the byte pools are warm.
func TestSplitAllocs(t *testing.T) {
	s := fastpath.GetSplitter()
	defer fastpath.PutSplitter(s)
	pick := &modPicker{3}
	for _, c := range []struct {
		in  []byte
		bal fastpath.Balance
	}{
		{splitBenchBatch(t, 100, 10), fastpath.BalanceTraceID},
		{splitTraces(t), fastpath.BalanceTraceID},
		{splitTraces(t), fastpath.BalanceService},
		{splitTraces(t), fastpath.BalanceResource},
	} {
		in, bal := c.in, c.bal
		run := func() {
			if _, err := s.Partition(fastpath.Traces, in, bal, 3, pick); err != nil {
				t.Fatal(err)
			}
			s.ReleaseParts()
		}
		run()
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Errorf("%v: %v allocations per split, want 0", bal, n)
		}
	}
}
