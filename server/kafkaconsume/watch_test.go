package kafkaconsume

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// A partition assigned to the consumer whose leader never serves it, and that holds records
// past the group's committed offset from before the consumer started, is reported as stalled
// once the stall timeout passed, with the committed offset as its read position, though no
// record of it ever arrived (it entered the watch only at its first record before); a
// partition read up to its end at the committed offset beside it is idle, not stalled. Once
// the leader serves the fetches, the records past the commit are delivered, and the partition
// is reported as read again.
func TestConsumeStallOfPartitionNeverFetched(t *testing.T) {
	kc := newCluster(t, 2)

	// Partition 0 holds 5 records, the group committed 2 of them; partition 1 holds 2, both
	// committed.
	gen := otlpgen.New(11)
	var values [][]byte
	var recs []*kgo.Record
	for i := range 7 {
		b, err := gen.Spans(otlpgen.Shape{Spans: 2, Attrs: 1}).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, b)
		recs = append(recs, &kgo.Record{Topic: "otlp_spans", Partition: int32(i / 5), Value: b})
	}
	// Versions before topic IDs: the commit below names its topic.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "stall", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "otlp_spans"
	for id := range int32(2) {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = id, 2, -1
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit of partition %d: error %d", p.Partition, p.ErrorCode)
		}
	}

	// The leader takes every fetch and answers none until released.
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		kc.SleepControl(func() { <-release })
		return nil, nil, false
	})

	c, in, logs, stallsBefore := startStallWatch(t, kc, "stall")
	stopped := false
	defer func() {
		if !stopped {
			c.Shutdown(context.Background())
		}
	}()

	eventually(t, func() string { return "no partition reported as stalled; the log:\n" + logs.String() },
		func() bool { return testutil.ToFloat64(stalled) != 0 })
	if got := testutil.ToFloat64(stalled); got != 1 {
		t.Fatalf("%v partitions stalled, want 1 (partition 0; partition 1 is read up to its end)", got)
	}
	if got := testutil.ToFloat64(stalls) - stallsBefore; got != 1 {
		t.Errorf("%v stalls counted, want 1", got)
	}
	lines := func(msg string) (out []string) {
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, msg) {
				out = append(out, l)
			}
		}
		return out
	}
	stallLines := lines("kafka consumer partition stalled: the brokers hold records past its read position")
	if len(stallLines) != 1 {
		t.Fatalf("%d stall lines logged, want 1; the log:\n%s", len(stallLines), logs.String())
	}
	for _, want := range []string{"level=WARN", " topic=otlp_spans ", " partition=0 ", " offset=2 ", " end=5 ", " for="} {
		if !strings.Contains(stallLines[0], want) {
			t.Errorf("the stall line has no %q: %s", want, stallLines[0])
		}
	}
	lagOf := func(id string) float64 { return testutil.ToFloat64(lag.WithLabelValues("otlp_spans", id)) }
	if l0, l1 := lagOf("0"), lagOf("1"); l0 != 3 || l1 != 0 {
		t.Errorf("lag %v and %v, want 3 and 0 (past the committed offsets)", l0, l1)
	}
	if n := len(in.taken()); n != 0 {
		t.Fatalf("the sink took %d requests while no fetch was answered", n)
	}

	close(release)
	released = true
	eventually(t, func() string { return fmt.Sprintf("%d of 3 requests at the sink", len(in.taken())) },
		func() bool { return len(in.taken()) == 3 })
	eventually(t, func() string { return "partition 0 still reported as stalled" },
		func() bool { return testutil.ToFloat64(stalled) == 0 })
	again := lines("kafka consumer reads a stalled partition again")
	if len(again) != 1 {
		t.Fatalf("%d lines of a partition read again, want 1; the log:\n%s", len(again), logs.String())
	}
	for _, want := range []string{"level=INFO", " topic=otlp_spans ", " partition=0 ", " offset=5"} {
		if !strings.Contains(again[0], want) {
			t.Errorf("the line of the partition read again has no %q: %s", want, again[0])
		}
	}
	eventually(t, func() string { return fmt.Sprintf("committed offset %d, want 5", committedOffset(t, kc, "stall")) },
		func() bool { return committedOffset(t, kc, "stall") == 5 })
	stopped = true
	sctx, scancel := context.WithTimeout(context.Background(), waitFor)
	defer scancel()
	if err := c.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	got := in.taken()
	if len(got) != 3 {
		t.Fatalf("the sink took %d requests, want the 3 records past the commit", len(got))
	}
	for i, want := range values[2:5] {
		if !bytes.Equal(got[i], want) {
			t.Errorf("request %d at the sink is not record %d of partition 0: spans %v, want %v", i, i+2, spanIDs(t, got[i]), spanIDs(t, want))
		}
	}
	if got := testutil.ToFloat64(stalls) - stallsBefore; got != 1 {
		t.Errorf("%v stalls counted in all, want 1", got)
	}
}

// A partition read up to its end whose leader stops answering its end offset is reported as
// stalled after the stall timeout (nothing says whether records wait there); once the leader
// answers again and nothing waits, the partition is idle and leaves the gauge, without a record
// moving it, and a leader that stops answering once more is reported once more.
func TestConsumeStallEndsWhenTheLeaderAnswersAgain(t *testing.T) {
	kc := newCluster(t, 1)
	cl, ctx, done := clientOf(t, kc)
	defer done()
	gen := otlpgen.New(12)
	var values [][]byte
	for range 2 {
		b, err := gen.Spans(otlpgen.Shape{Spans: 2, Attrs: 1}).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, b)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "otlp_spans", Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	c, in, logs, stallsBefore := startStallWatch(t, kc, "leader-back")
	defer c.Shutdown(context.Background())
	eventually(t, func() string { return fmt.Sprintf("%d of 2 requests at the sink", len(in.taken())) },
		func() bool { return len(in.taken()) == 2 })
	eventually(t, func() string {
		return fmt.Sprintf("committed offset %d, want 2", committedOffset(t, kc, "leader-back"))
	},
		func() bool { return committedOffset(t, kc, "leader-back") == 2 })

	// The leader holds every end-offset listing until released; fetches are answered as before.
	silence := func() (release func()) {
		ch := make(chan struct{})
		kc.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
			select {
			case <-ch:
				return nil, nil, false // released: this control is done, the broker answers
			default:
			}
			kc.KeepControl()
			kc.SleepControl(func() { <-ch })
			return nil, nil, false
		})
		var once sync.Once
		return func() { once.Do(func() { close(ch) }) }
	}
	count := func(msg string) int { return strings.Count(logs.String(), msg) }
	const stallMsg = "kafka consumer partition stalled: its leader has not answered its end offset"
	const backMsg = "kafka consumer partition no longer stalled: its leader answers its end offset"
	for round := 1; round <= 2; round++ {
		release := silence()
		eventually(t, func() string { return fmt.Sprintf("round %d: no stall reported; the log:\n%s", round, logs.String()) },
			func() bool { return testutil.ToFloat64(stalled) == 1 })
		if n := count(stallMsg); n != round {
			t.Fatalf("round %d: %d stall lines, want %d; the log:\n%s", round, n, round, logs.String())
		}
		release()
		eventually(t, func() string {
			return fmt.Sprintf("round %d: the partition is still reported as stalled; the log:\n%s", round, logs.String())
		},
			func() bool { return testutil.ToFloat64(stalled) == 0 })
		if n := count(backMsg); n != round {
			t.Fatalf("round %d: %d lines of the stall ending, want %d; the log:\n%s", round, n, round, logs.String())
		}
	}
	if got := testutil.ToFloat64(stalls) - stallsBefore; got != 2 {
		t.Errorf("%v stalls counted, want 2", got)
	}
	// No record moved the partition: the sink holds the two records, once each.
	got := in.taken()
	if len(got) != 2 || !bytes.Equal(got[0], values[0]) || !bytes.Equal(got[1], values[1]) {
		t.Errorf("the sink took %d requests, want the 2 records in order", len(got))
	}
}

// startStallWatch starts a consumer of otlp_spans in group with a one-second stall timeout,
// its log kept, and returns it with its sink, its log and the stalls counted before it.
func startStallWatch(t *testing.T, kc *kfake.Cluster, group string) (*Consumer, *sink, *testkit.LockedBuffer, float64) {
	t.Helper()
	cfg := kfakeConfig(kc, group)
	cfg.StallTimeout = time.Second
	if got := testutil.ToFloat64(stalled); got != 0 {
		t.Fatalf("%v partitions stalled before the consumer started", got)
	}
	stallsBefore := testutil.ToFloat64(stalls)
	in := &sink{}
	logs := &testkit.LockedBuffer{}
	return startConsumer(t, cfg, in, logs), in, logs, stallsBefore
}
