//go:build !race

package kafkadest

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// Cutting a batch into records and making its kgo records allocates nothing in otlpgate's
// code once the pools are warm, with round robin and by trace id, cut below the resource level
// or not. What kgo allocates once it holds the records (its batches, the request) is its own
// and not counted here.
func TestBuildAllocs(t *testing.T) {
	for _, tc := range []struct {
		name           string
		byTrace, byRes bool
		limit          int
	}{{"round_robin", false, false, 1 << 20}, {"round_robin_cut", false, false, 4 << 10}, {"trace_id", true, false, 1 << 20},
		{"trace_id_cut", true, false, 4 << 10}, {"resource", false, true, 1 << 20}, {"resource_cut", false, true, 4 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			req := traceRequest(t, 4, 2, 50, 20, 40)
			d := &Dest{cfg: Config{MaxMessageBytes: tc.limit, ByTraceID: tc.byTrace, ByResource: tc.byRes, Topics: [fastpath.NumSignals]string{"t", "m", "l"}}, cuts: cutEntries.WithLabelValues("alloc-test")}
			for i := range d.limits {
				d.limits[i].Store(int64(tc.limit))
			}
			pl := pool.NewPayload(len(req))
			*pl.Buf() = append((*pl.Buf())[:0], req...)
			b := pipeline.NewBatch(fastpath.Traces, 400, pl, noOwner{})
			defer b.Done(true)
			run := func() {
				s := getSend()
				s.d, s.b = d, b
				if err := s.build(); err != nil {
					t.Fatal(err)
				}
				if len(s.recs) == 0 {
					t.Fatal("no record")
				}
				putSend(s)
			}
			for range 10 {
				run()
			}
			if n := testing.AllocsPerRun(100, run); n != 0 {
				t.Errorf("%.1f allocations per batch", n)
			}
		})
	}
}
