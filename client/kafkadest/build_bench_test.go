package kafkadest

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// BenchmarkBuild reports the cost of cutting a batch of 400 spans into records and making
// their kgo records, per batch, before the producer takes them.
func BenchmarkBuild(b *testing.B) {
	for _, bc := range []struct {
		name  string
		cfg   Config
		limit int
	}{
		{"round_robin", Config{}, 1 << 20},
		{"round_robin_cut_4KiB", Config{}, 4 << 10},
		{"trace_id", Config{ByTraceID: true}, 1 << 20},
		{"resource", Config{ByResource: true}, 1 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := traceRequest(b, 4, 2, 50, 20, 40)
			d := &Dest{cfg: bc.cfg, cuts: cutEntries.WithLabelValues("bench")}
			d.cfg.Topics = [fastpath.NumSignals]string{"t", "m", "l"}
			for i := range d.limits {
				d.limits[i].Store(int64(bc.limit))
			}
			pl := pool.NewPayload(len(req))
			*pl.Buf() = append((*pl.Buf())[:0], req...)
			batch := pipeline.NewBatch(fastpath.Traces, 400, pl, noOwner{})
			defer batch.Done(true)
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				s := getSend()
				s.d, s.b = d, batch
				if err := s.build(); err != nil {
					b.Fatal(err)
				}
				putSend(s)
			}
		})
	}
}
