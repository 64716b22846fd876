//go:build !race

package client

import (
	"context"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// h2StreamBench is a streaming destination on a rawStreamUpstream (which allocates nothing per
// request) with a pipeline that seals every request as a batch.
type h2StreamBench struct {
	p    *pipeline.Pipeline
	d    *Dest
	body []byte
}

func newH2StreamBench(tb testing.TB, transport string, body []byte, rebalance int64, window int) *h2StreamBench {
	u := newRawStreamUpstream(tb, false).start()
	cfg := streamConfigOn(tb, transport, u.addr(), 1, window)
	cfg.RebalanceTimeout, cfg.RebalanceBytes, cfg.RebalanceRequests = 0, 0, rebalance
	d, err := New(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	d.Start()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		d.Shutdown(ctx)
	})
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	pc.QueueMaxBytes = cfg.QueueBytes / 2 // the pipeline refuses before the destination would
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return &h2StreamBench{p: p, d: d, body: body}
}

// admit hands one batch to the destination, waiting while the queue is full.
func (b *h2StreamBench) admit() {
	for {
		_, err := b.p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: b.body, Items: 1})
		if err == nil {
			return
		}
		// The queue is full: let the lane drain it, without spinning (the benchmark reports
		// the process's CPU).
		time.Sleep(20 * time.Microsecond)
	}
}

// until waits until n requests were acknowledged.
func (b *h2StreamBench) until(n uint64) {
	// A sleep, not a yield: AllocsPerRun runs on one P, where a goroutine that only yields
	// keeps the scheduler from polling the network.
	for deadline := time.Now().Add(waitFor); b.d.acked.Load() < n; time.Sleep(10 * time.Microsecond) {
		if time.Now().After(deadline) {
			panic("requests not acknowledged in time")
		}
	}
}

// A batch sent on an OTEP stream of the own transport, from the pipeline's hand-over to its
// acknowledgement (the lane's frame and DATA written with writev from the batch's bytes, the
// reader's decoding of the answer, the receiver's match by id and the delivery), allocates
// nothing in steady state, counted over the whole process, the upstream included; nor does a
// stream re-opened every 16 requests (its HEADERS, the recycled stream and receiver).
func TestH2StreamZeroAlloc(t *testing.T) {
	for _, c := range []struct {
		name      string
		body      []byte
		rebalance int64
	}{
		{"small", traceBody("s", 2, 100), 0},
		{"large", traceBody("l", 200, 2000), 0},
		{"reopen", traceBody("r", 2, 100), 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newH2StreamBench(t, TransportOtlpgate, c.body, c.rebalance, 64)
			var n uint64
			one := func() {
				n++
				b.admit()
				b.until(n)
			}
			for range 100 {
				one()
			}
			if allocs := testing.AllocsPerRun(300, one); allocs != 0 {
				t.Fatalf("%v allocations per batch", allocs)
			}
			if got := value(b.d.m.ackedRequests); uint64(got) != n {
				t.Fatalf("acknowledged %d of %d", got, n)
			}
		})
	}
}

// BenchmarkH2Stream compares the two transports on one OTEP stream (window 64) to the same
// upstream, batches pipelined; cpu-ns/batch is the whole process's CPU per batch.
func BenchmarkH2Stream(b *testing.B) {
	for _, size := range []struct {
		name string
		body []byte
	}{{"small", traceBody("s", 2, 100)}, {"large", traceBody("l", 200, 2000)}} {
		for _, tr := range []string{TransportGRPCGo, TransportOtlpgate} {
			b.Run(size.name+"/"+tr, func(b *testing.B) {
				h := newH2StreamBench(b, tr, size.body, 0, 64)
				h.admit()
				h.until(1)
				b.ReportAllocs()
				b.SetBytes(int64(len(size.body)))
				b.ResetTimer()
				n := uint64(1)
				cpu := cpuNanos()
				for b.Loop() {
					h.admit()
					n++
				}
				h.until(n)
				b.StopTimer()
				// The process's CPU, the upstream's included: steadier than the wall time on a
				// shared machine.
				b.ReportMetric(float64(cpuNanos()-cpu)/float64(n-1), "cpu-ns/batch")
			})
		}
	}
}
