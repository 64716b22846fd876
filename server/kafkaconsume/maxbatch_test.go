package kafkaconsume

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

const waitFor = 15 * time.Second

// sink is an Admitter that keeps a copy of every request body it takes, durable at once as
// the spool's admission is.
type sink struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *sink) AdmitDelivered(req pipeline.Request) (*pipeline.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, bytes.Clone(req.Body))
	return nil, nil
}

func (s *sink) RetryDelay() time.Duration { return time.Millisecond }

func (s *sink) Fill() (int64, int64) { return 0, 0 }

func (s *sink) taken() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

func eventually(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", waitFor, what())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produce writes values to otlp_spans' one partition with opts, in one batch when they fit
// one, and waits until the brokers took them.
func produce(t *testing.T, kc *kfake.Cluster, values [][]byte, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Value: v}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// clientOf is a client of kc and a context for its requests that ends within waitFor; done
// closes the client and ends the context.
func clientOf(t *testing.T, kc *kfake.Cluster) (cl *kgo.Client, ctx context.Context, done func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	return cl, ctx, func() { cancel(); cl.Close() }
}

// newCluster is a kfake cluster of one broker holding otlp_spans with that many partitions,
// closed when the test ends.
func newCluster(t *testing.T, partitions int32) *kfake.Cluster {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "otlp_spans"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc
}

// kfakeConfig is a consumer of otlp_spans (traces) on kc as a member of group, committing,
// joining and giving partitions up as quickly as a test wants.
func kfakeConfig(kc *kfake.Cluster, group string) Config {
	cfg := DefaultConfig()
	cfg.Brokers = kc.ListenAddrs()
	cfg.Topics = []Topic{{Name: "otlp_spans", Signal: fastpath.Traces}}
	cfg.Group = group
	cfg.CommitInterval = 20 * time.Millisecond
	cfg.SessionTimeout = 6 * time.Second
	cfg.RevokeWait = time.Second
	return cfg
}

// startConsumer makes a consumer of cfg admitting into in and logging into logs, and starts it.
func startConsumer(t *testing.T, cfg Config, in Admitter, logs *testkit.LockedBuffer) *Consumer {
	t.Helper()
	c, err := New(cfg, in, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// committedOffset is the offset group committed for otlp_spans' partition 0, -1 for none.
func committedOffset(t *testing.T, kc *kfake.Cluster, group string) int64 {
	t.Helper()
	return committedOffsetOf(t, kc, group, 0)
}

// committedOffsetOf is the offset group committed for otlp_spans' partition id, -1 for none.
func committedOffsetOf(t *testing.T, kc *kfake.Cluster, group string, id int32) int64 {
	t.Helper()
	cl, ctx, done := clientOf(t, kc)
	defer done()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "otlp_spans", []int32{id}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Partition == id {
				return p.Offset
			}
		}
	}
	return -1
}

// spanIDs are the span IDs of an otlp_proto trace request, as the Collector decodes it.
func spanIDs(t *testing.T, body []byte) []string {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	if err != nil {
		t.Fatalf("the sink took a request the Collector refuses: %v", err)
	}
	var ids []string
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				ids = append(ids, s.SpanID().String())
			}
		}
	}
	return ids
}

// A compressed batch that decompresses past -kafka.consume.max-batch-bytes (a few KiB of
// gzipped zeros: what a broken or hostile producer can write to a consumed topic) is not
// decompressed: the consumer skips it whole, counts its records as batch_too_large, logs it,
// and commits past it, so the records after it are delivered, and a consumer started again
// on the group neither meets the batch again nor delivers anything twice.
func TestConsumeBatchPastMaxBatchBytes(t *testing.T) {
	kc := newCluster(t, 1)

	gen := otlpgen.New(7)
	good := func() []byte {
		b, err := gen.Spans(otlpgen.Shape{Spans: 3, Attrs: 2}).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first, second, third := good(), good(), good()
	if bytes.Equal(first, second) || bytes.Equal(second, third) {
		t.Fatal("the generator made the same request twice")
	}
	const bombRecords = 4
	zeros := make([]byte, 48<<10)

	produce(t, kc, [][]byte{first})
	// Four records of zeros in one gzip batch of a few hundred bytes that decompresses to
	// 192KiB, past the consumer's bound of 64KiB, each record within its record bound.
	produce(t, kc, [][]byte{zeros, zeros, zeros, zeros},
		kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(time.Second), kgo.ProducerBatchMaxBytes(1<<20))
	produce(t, kc, [][]byte{second})

	cfg := kfakeConfig(kc, "bomb")
	cfg.MaxRecordBytes = 64 << 10
	cfg.MaxBatchBytes = 64 << 10
	cfg.LogInterval = time.Millisecond // a fetch error logged before cannot hide the batch's line

	skippedBefore := map[string]float64{}
	for r := range numSkipReasons {
		skippedBefore[skipNames[r]] = testutil.ToFloat64(skippedC[r])
	}
	skippedNow := func() map[string]float64 {
		d := map[string]float64{}
		for r := range numSkipReasons {
			if n := testutil.ToFloat64(skippedC[r]) - skippedBefore[skipNames[r]]; n != 0 {
				d[skipNames[r]] = n
			}
		}
		return d
	}

	stop := func(c *Consumer) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets: first 0, the batch 1..4, second 5, third 6.
	const afterBomb = 1 + bombRecords + 1

	var in sink
	var logs testkit.LockedBuffer
	c := startConsumer(t, cfg, &in, &logs)
	eventually(t, func() string { return fmt.Sprintf("%d of 2 requests at the sink", len(in.taken())) },
		func() bool { return len(in.taken()) == 2 })
	eventually(t, func() string {
		return fmt.Sprintf("committed offset %d, want %d", committedOffset(t, kc, "bomb"), afterBomb)
	},
		func() bool { return committedOffset(t, kc, "bomb") == afterBomb })
	stop(c)

	got := in.taken()
	if len(got) != 2 {
		t.Fatalf("the sink took %d requests, want the 2 well-formed records", len(got))
	}
	for i, want := range [][]byte{first, second} {
		if !bytes.Equal(got[i], want) {
			t.Errorf("request %d at the sink is not the record produced: spans %v, want %v", i, spanIDs(t, got[i]), spanIDs(t, want))
		}
		if n := len(spanIDs(t, got[i])); n != 3 {
			t.Errorf("request %d holds %d spans, want 3", i, n)
		}
	}
	if d := skippedNow(); len(d) != 1 || d["batch_too_large"] != bombRecords {
		t.Errorf("skipped records %v, want batch_too_large: %d and nothing else", d, bombRecords)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "max-batch-bytes") {
			line = l
		}
	}
	for _, want := range []string{"topic=otlp_spans", "partition=0", "offset=1", "next_offset=5", "records=4", "max_batch_bytes=65536"} {
		if !strings.Contains(line, want) {
			t.Errorf("no log line of the skipped batch with %s; the log:\n%s", want, logs.String())
		}
	}

	// Started again on the group, the consumer reads from past the batch: only what comes
	// after is delivered, and the batch is neither met nor counted again.
	var again sink
	var logsAgain testkit.LockedBuffer
	c = startConsumer(t, cfg, &again, &logsAgain)
	produce(t, kc, [][]byte{third})
	eventually(t, func() string { return fmt.Sprintf("%d of 1 request at the sink", len(again.taken())) },
		func() bool { return len(again.taken()) == 1 })
	eventually(t, func() string {
		return fmt.Sprintf("committed offset %d, want %d", committedOffset(t, kc, "bomb"), afterBomb+1)
	},
		func() bool { return committedOffset(t, kc, "bomb") == afterBomb+1 })
	stop(c)
	if got := again.taken(); len(got) != 1 || !bytes.Equal(got[0], third) {
		t.Errorf("after the restart the sink took %d requests, want only the record produced then", len(got))
	}
	if d := skippedNow(); len(d) != 1 || d["batch_too_large"] != bombRecords {
		t.Errorf("skipped records after the restart %v, want batch_too_large: %d and nothing else", d, bombRecords)
	}
	if strings.Contains(logsAgain.String(), "max-batch-bytes") {
		t.Errorf("the batch was met again after the restart:\n%s", logsAgain.String())
	}
}
