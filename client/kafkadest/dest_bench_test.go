package kafkadest

import (
	"context"
	"testing"
	"time"

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
