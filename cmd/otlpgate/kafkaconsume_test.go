package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// kafkaTopicPartitions is the partitions of the test cluster's topic.
const kafkaTopicPartitions = 6

// startKafkaCluster is three brokers in the test process with the Collector's trace topic.
func startKafkaCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(kafkaTopicPartitions, "otlp_spans"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// kafkaProducer starts the binary with only the gRPC intake, answering each request once the
// brokers of kc acknowledged its spans (-ack=upstream), into a Kafka destination keyed by
// trace id.
func kafkaProducer(t *testing.T, bin string, kc *kfake.Cluster) *gateway {
	t.Helper()
	g := startGateway(t, bin, "-http.listen", "", "-kafka.listen", "", "-ack", "upstream", "-shutdown.timeout", "5s",
		"-dest", "name=kafka,protocol=kafka,partition=trace_id,retry-initial=20ms,retry-max=200ms,brokers="+strings.Join(kc.ListenAddrs(), ","))
	waitReady(t, g)
	return g
}

// kafkaConsumer starts the binary reading otlp_spans of kc in group otlpgate and delivering to
// upstream over OTEP streams; its gRPC intake is on but unused.
func kafkaConsumer(t *testing.T, bin string, kc *kfake.Cluster, upstream string) *gateway {
	t.Helper()
	g := startGateway(t, bin, "-http.listen", "", "-kafka.listen", "", "-shutdown.timeout", "5s",
		"-kafka.consume.brokers", strings.Join(kc.ListenAddrs(), ","), "-kafka.consume.topics", "otlp_spans",
		"-kafka.consume.commit-interval", "100ms", "-kafka.consume.session-timeout", "6s",
		"-dest", "name=up,endpoint="+upstream+",protocol=otep,mode=stream,retry-initial=20ms,retry-max=200ms")
	waitReady(t, g)
	return g
}

// groupOffsets is the offsets group otlpgate committed on otlp_spans, by partition (absent:
// none).
func groupOffsets(t *testing.T, kc *kfake.Cluster) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "otlpgate"
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = "otlp_spans"
	for p := range int32(kafkaTopicPartitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

// spansFrom is the span ids of the records of otlp_spans at or past from (by partition; a
// partition absent from from is read from its start), up to the end of each partition now.
func spansFrom(t *testing.T, kc *kfake.Cluster, from map[int32]int64) map[uint64]bool {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range int32(kafkaTopicPartitions) {
		if o, ok := from[p]; ok {
			offs[p] = kgo.NewOffset().At(o)
		} else {
			offs[p] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"otlp_spans": offs}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ids := map[uint64]bool{}
	// Read until a poll brings nothing twice in a row: the topic is not written meanwhile.
	for empty := 0; empty < 2; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			spans, err := testkit.SpanIDs(r.Value)
			if err != nil {
				t.Fatalf("record %d/%d: %v", r.Partition, r.Offset, err)
			}
			for _, id := range spans {
				ids[id] = true
			}
		})
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return ids
}

// Spans go from a load generator to one otlpgate, which produces them to a Kafka cluster of
// three brokers (in the test process) and answers only once the brokers have them; a second
// otlpgate consumes them and delivers them to an upstream. The consumer is killed with SIGKILL
// mid-run, while records keep coming, and started again: every span the first otlpgate
// acknowledged reaches the upstream, and every span the upstream received twice was in a
// record past the offsets the group had committed at the kill (what was in flight), so the
// duplicates are bounded by what the consumer had not yet acknowledged.
func TestKafkaConsumerSurvivesKill9(t *testing.T) {
	bin := buildBinary(t)
	kc := startKafkaCluster(t)
	u := testkit.StartGRPCSink(t, "")
	prod := kafkaProducer(t, bin, kc)
	cons := kafkaConsumer(t, bin, kc, u.Addr())

	l := newLoader(7, otlpgen.Shape{Spans: 10, Attrs: 2, Traces: 3})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { l.run(t, prod.grpcAddr, 4, stop); close(done) }()
	testkit.WaitFor(t, "3000 spans at the upstream through Kafka", func() bool { n, _ := u.SpanCount(); return n >= 3000 })

	kill9(t, cons) // the load is still running
	atKill := u.Spans()
	committed := groupOffsets(t, kc)
	testkit.WaitFor(t, "500 more spans acknowledged by the producer after the kill", func() bool {
		return len(l.ackedIDs()) >= len(atKill)+500
	})
	close(stop)
	<-done
	acked := l.ackedIDs()
	inFlight := spansFrom(t, kc, committed) // what the group reads again after the restart
	redeliverable := 0
	for id := range atKill {
		if inFlight[id] {
			redeliverable++
		}
	}

	cons2 := kafkaConsumer(t, bin, kc, u.Addr())
	dups, distinct := arrived(t, u, acked, l.sent)
	for id, n := range u.Spans() {
		if n > 1 && !inFlight[id] {
			t.Errorf("span %d arrived %d times though its record was committed before the kill", id, n)
		}
	}
	if dups > redeliverable {
		t.Errorf("%d duplicates, more than the %d spans delivered before the kill past the committed offsets", dups, redeliverable)
	}
	t.Logf("%d spans acknowledged by the producer, %d distinct at the upstream; at the kill %d delivered, of which %d past the committed offsets %v; %d duplicates after the restart",
		len(acked), distinct, len(atKill), redeliverable, committed, dups)
	for _, g := range []*gateway{cons2, prod} {
		g.terminate(t)
		if g.exitErr != nil {
			t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
		}
	}
}
