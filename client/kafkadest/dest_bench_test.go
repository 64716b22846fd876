package kafkadest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// doneOwner tells a channel when a batch is finished.
type doneOwner chan bool

func (o doneOwner) BatchDone(delivered bool) { o <- delivered }

// BenchmarkDestProduce reports what a batch of 400 spans costs from Enqueue to the brokers'
// acknowledgement of its records (acks=all, idempotent), a cluster of one broker in the same
// process answering; its allocations are kgo's and kfake's too. BenchmarkCopy beside it is the
// cost of copying the same bytes once, the floor of any transport.
func BenchmarkDestProduce(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"round_robin", Config{}},
		{"trace_id", Config{ByTraceID: true}},
		{"round_robin_zstd", Config{Compression: "zstd"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "t", "m", "l"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := bc.cfg
			cfg.Name, cfg.Brokers = "bench", c.ListenAddrs()
			cfg.Topics = [fastpath.NumSignals]string{"t", "m", "l"}
			cfg.MaxMessageBytes, cfg.QueueBytes = 1<<20, 64<<20
			cfg.DeliveryTimeout, cfg.RetryInitial, cfg.RetryMax = 10*time.Second, 10*time.Millisecond, 100*time.Millisecond
			d, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Shutdown(context.Background())
			req := traceRequest(b, 4, 2, 50, 20, 40)
			done := make(doneOwner, 1)
			send := func() {
				pl := pool.NewPayload(len(req))
				*pl.Buf() = append((*pl.Buf())[:0], req...)
				if err := d.Enqueue(pipeline.NewBatch(fastpath.Traces, 400, pl, done)); err != nil {
					b.Fatal(err)
				}
				if !<-done {
					b.Fatal("a batch was not delivered")
				}
			}
			send()
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				send()
			}
		})
	}
}

// BenchmarkCopy is the cost of copying a batch's bytes once.
func BenchmarkCopy(b *testing.B) {
	req := traceRequest(b, 4, 2, 50, 20, 40)
	dst := make([]byte, len(req))
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		copy(dst, req)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDestThroughput is the destination's throughput: batches of 400 spans (4 resources,
// 20 traces) enqueued with up to 64 of them waiting for the brokers at once, into a cluster of
// three brokers and 6 partitions in the same process, until every record is acknowledged
// (acks=all, idempotent). records/cpu-s and MB/cpu-s are per second of the whole process's
// CPU time (user and system), the brokers' (kfake) included: a bound from below of otlpgate's
// own. copy_MB/s is a memmove of the same batch bytes, the cost of touching them once.
func BenchmarkDestThroughput(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"round_robin", Config{}},
		{"trace_id", Config{ByTraceID: true}},
		{"resource", Config{ByResource: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "t", "m", "l"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := bc.cfg
			cfg.Name, cfg.Brokers = "throughput-"+bc.name, c.ListenAddrs()
			cfg.Topics = [fastpath.NumSignals]string{"t", "m", "l"}
			cfg.MaxMessageBytes, cfg.QueueBytes = 1<<20, 256<<20
			cfg.DeliveryTimeout, cfg.RetryInitial, cfg.RetryMax = 30*time.Second, 10*time.Millisecond, 100*time.Millisecond
			d, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Shutdown(context.Background())
			req := traceRequest(b, 4, 2, 50, 20, 40)
			const window = 64
			done := make(doneOwner, window)
			enqueue := func() {
				pl := pool.NewPayload(len(req))
				*pl.Buf() = append((*pl.Buf())[:0], req...)
				if err := d.Enqueue(pipeline.NewBatch(fastpath.Traces, 400, pl, done)); err != nil {
					b.Fatal(err)
				}
			}
			wait := func() {
				if !<-done {
					b.Fatal("a batch was not delivered")
				}
			}
			enqueue() // the producer learns the topics' limits and partitions
			wait()
			records0 := testutil.ToFloat64(d.acked)
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			b.ResetTimer()
			cpu0, wall0 := cpuTime(), time.Now()
			out := 0
			for range b.N {
				if out == window {
					wait()
					out--
				}
				enqueue()
				out++
			}
			for ; out > 0; out-- {
				wait()
			}
			b.StopTimer()
			cpu, wall := cpuTime()-cpu0, time.Since(wall0)
			records := testutil.ToFloat64(d.acked) - records0
			b.ReportMetric(records/wall.Seconds(), "records/s")
			b.ReportMetric(records/cpu.Seconds(), "records/cpu-s")
			b.ReportMetric(float64(b.N*len(req))/cpu.Seconds()/1e6, "MB/cpu-s")
			b.ReportMetric(float64(400*b.N)/cpu.Seconds(), "spans/cpu-s")
			dst := make([]byte, len(req))
			t0 := time.Now()
			for range b.N {
				copy(dst, req)
			}
			b.ReportMetric(float64(b.N*len(req))/time.Since(t0).Seconds()/1e6, "copy_MB/s")
		})
	}
}
