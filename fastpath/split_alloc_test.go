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
		bal fastpath.SplitKey
	}{
		{splitBenchBatch(t, 100, 10), fastpath.SplitTraceID},
		{splitTraces(t), fastpath.SplitTraceID},
		{splitTraces(t), fastpath.SplitService},
		{splitTraces(t), fastpath.SplitResource},
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
			t.Errorf("%s: %v allocations per split, want 0", splitKeyNames[bal], n)
		}
	}
}
