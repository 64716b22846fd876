package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/server/kafkaconsume"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKafkaConsume is the consumer intake end to end: b.N records of 100 spans (4
// attributes each, otlp_proto, 6 partitions over three brokers) are produced before the timer
// starts; the timer runs while a gateway's consumer reads, checks and admits them and the
// pipeline hands their batches to a destination that discards them, until every span went
// through and every offset is committed; the group's join before the first span is left out. The brokers (kfake) run in the same process, so the
// CPU figure (records per CPU-second, the process's user and system time) includes theirs: it
// is a bound from below of otlpgate's own. copy_MB/s is a memmove of the same record bytes,
// the cost of touching them once.
func BenchmarkKafkaConsume(b *testing.B) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "otlp_spans"))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	req := otlpgen.New(1).Spans(otlpgen.Shape{Spans: 100, Attrs: 4})
	value, err := req.MarshalVT()
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, b.N)
	for i := range recs {
		recs[i] = &kgo.Record{Value: value}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < len(recs); i += 1000 {
		if err := cl.ProduceSync(ctx, recs[i:min(i+1000, len(recs))]...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	cl.Close()

	sink := &testkit.Discard{}
	cfg := testConfig()
	cfg.GRPC.Listen, cfg.HTTP.Listen, cfg.Admin.Listen = "", "", ""
	cfg.KafkaConsume.Brokers = kc.ListenAddrs()
	cfg.KafkaConsume.Topics = []kafkaconsume.Topic{{Name: "otlp_spans", Signal: fastpath.Traces}}
	cfg.KafkaConsume.Group = fmt.Sprintf("bench-%d", b.N)
	cfg.KafkaConsume.CommitInterval = 20 * time.Millisecond
	cfg.Extra = []pipeline.Destination{sink}
	g, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	want := int64(100 * b.N)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.StopTimer()
	if err := g.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	// The group's join is not the consumer's throughput: the clock starts with the first span.
	for sink.Items() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	b.StartTimer()
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	for deadline := time.Now().Add(5 * time.Minute); sink.Items() < want || lagOf(g) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d spans in 5 minutes", sink.Items(), want)
		}
	}
	b.StopTimer()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	g.Shutdown(context.Background())
	b.ReportMetric(float64(b.N)/wall.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(b.N*len(value))/cpu.Seconds()/1e6, "MB/cpu-s")
	b.ReportMetric(float64(want)/wall.Seconds(), "spans/s")
	dst := make([]byte, len(value))
	t0 := time.Now()
	for range b.N {
		copy(dst, value)
	}
	b.ReportMetric(float64(b.N*len(value))/time.Since(t0).Seconds()/1e6, "copy_MB/s")
}

// lagOf is the consumer's lag summed over its partitions, -1 before it holds one.
func lagOf(g *Gateway) int64 {
	l := g.kc.Lag()
	if len(l) == 0 {
		return -1
	}
	var sum int64
	for _, ps := range l {
		for _, n := range ps {
			sum += n
		}
	}
	return sum
}
