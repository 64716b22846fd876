package client

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// BenchmarkDestCycle measures the destination's own work per request, without the network:
// Enqueue from the pipeline, a sender taking it from the queue, and delivery on Success.
func BenchmarkDestCycle(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Name, cfg.Endpoint = "bench_cycle", "127.0.0.1:1"
	d, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	body := traceBody("z", 1, 4000)
	timer := stoppedTimer()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for range b.N {
		if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			b.Fatal(err)
		}
		d.deliver(d.next(fastpath.Traces, timer))
	}
}

// BenchmarkStreamLoopback sends batches through one destination to an OTEP stream upstream
// on 127.0.0.1 that answers every request at once; allocations are mostly gRPC's.
func BenchmarkStreamLoopback(b *testing.B) {
	for _, size := range []int{16 << 10, 256 << 10} {
		b.Run("batch="+strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			u := newUpstream(b)
			u.countOnly = true
			cfg := streamConfig(b, u.addr, 2, 64)
			d, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			d.Start()
			pc := pipeline.DefaultConfig()
			pc.BatchMaxItems = 1
			// Below the destination's queue: the pipeline refuses (and the loop waits) before
			// the destination would drop.
			pc.QueueMaxBytes = cfg.QueueBytes / 2
			p, err := pipeline.New(pc, []pipeline.Destination{d})
			if err != nil {
				b.Fatal(err)
			}
			body := traceBody("l", max(1, size/4096), 4000)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}) != nil {
					runtime.Gosched() // the queue is full: let the senders drain it
				}
			}
			for d.outstanding.Load() > 0 {
				time.Sleep(100 * time.Microsecond)
			}
			b.StopTimer()
			p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			if err := d.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			if n := value(d.m.ackedRequests); n != b.N {
				b.Fatalf("acknowledged %d of %d", n, b.N)
			}
		})
	}
}
