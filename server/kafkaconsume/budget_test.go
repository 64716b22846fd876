package kafkaconsume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// gatedSink is a sink whose admissions wait until open is closed.
type gatedSink struct {
	sink
	open    chan struct{}
	waiting sync.Once
	entered chan struct{} // closed at the first admission
}

func (s *gatedSink) AdmitDelivered(req pipeline.Request) (*pipeline.Batch, error) {
	s.waiting.Do(func() { close(s.entered) })
	<-s.open
	return s.sink.AdmitDelivered(req)
}

// batchProducer is a zstd producer to otlp_spans on kc: produce writes value to partition p as
// a batch of its own, waiting until the broker took it; done closes the producer.
func batchProducer(t *testing.T, kc *kfake.Cluster) (produce func(p int32, value []byte), done func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	return func(p int32, value []byte) {
			t.Helper()
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}, func() {
			cancel()
			cl.Close()
		}
}

// blobRequest is an OTLP trace request of one span whose attribute holds n bytes of one
// letter: a record that compresses to a few KiB.
func blobRequest(t *testing.T, id byte, n int) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID([16]byte{1, id})
	s.SetSpanID([8]byte{2, id})
	s.SetName("blob")
	s.Attributes().PutStr("blob", strings.Repeat("x", n))
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Batches that each decompress within -kafka.consume.max-batch-bytes but together far past
// what a fetch should cost (24 batches of 1MiB, a few KiB each compressed, all in one fetch)
// are not all decompressed at once: while the consumer is held by its first record, its
// client holds no more than -kafka.consume.max-buffered-bytes and one batch, where without
// the budget it held all 24MiB. One partition's fetch ends at the batch put off; the other's
// first batch is put off whole (the error path). Once the consumer goes on, every record is
// delivered byte for byte, in order per partition, and none is skipped.
func TestConsumeBufferedBytesBound(t *testing.T) {
	kc := newCluster(t, 2)

	const perPartition, blob = 12, 1 << 20
	want := map[int32][][]byte{}
	produce, done := batchProducer(t, kc)
	for i := range perPartition {
		for p := range int32(2) {
			v := blobRequest(t, byte(i*2+int(p)), blob)
			produce(p, v)
			want[p] = append(want[p], v)
		}
	}
	done()

	cfg := kfakeConfig(kc, "budget")
	cfg.MaxRecordBytes = 2 << 20
	cfg.MaxBatchBytes = 2 << 20
	cfg.MaxBufferedBytes = 3 << 20
	cfg.MaxPollRecords = 1

	deferredBefore := testutil.ToFloat64(deferredBatches)
	skippedBefore := 0.0
	for r := range numSkipReasons {
		skippedBefore += testutil.ToFloat64(skippedC[r])
	}
	errorsBefore := testutil.ToFloat64(fetchErrors)

	in := &gatedSink{open: make(chan struct{}), entered: make(chan struct{})}
	var logs testkit.LockedBuffer
	c := startConsumer(t, cfg, in, &logs)
	select {
	case <-in.entered:
	case <-time.After(waitFor):
		t.Fatal("no record reached the sink")
	}
	// The consumer holds its first record; the client reads what it will until then, which
	// is all it holds once the figure stays put for a while.
	held, since := int64(-1), time.Now()
	eventually(t, func() string { return fmt.Sprintf("the client's buffered bytes still move (%d)", held) },
		func() bool {
			if n := c.cl.BufferedFetchBytes(); n != held {
				held, since = n, time.Now()
			}
			return held > 0 && time.Since(since) > 300*time.Millisecond
		})
	if bound := int64(cfg.MaxBufferedBytes + cfg.MaxBatchBytes); held > bound || held < blob {
		t.Errorf("the client holds %d bytes of fetched records while the consumer waits, want 1MiB..%d", held, bound)
	}
	if testutil.ToFloat64(deferredBatches) == deferredBefore {
		t.Error("no batch was put off")
	}
	close(in.open)

	total := 2 * perPartition
	eventually(t, func() string { return fmt.Sprintf("%d of %d requests at the sink", len(in.taken()), total) },
		func() bool { return len(in.taken()) == total })
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	got := in.taken()
	if len(got) != total {
		t.Fatalf("the sink took %d requests, want %d", len(got), total)
	}
	// Each partition's records in the order produced: the sink's order interleaves the two.
	next := map[int32]int{}
	for i, b := range got {
		var p int32 = -1
		for q := range int32(2) {
			if n := next[q]; n < perPartition && bytes.Equal(b, want[q][n]) {
				p = q
			}
		}
		if p < 0 {
			t.Fatalf("request %d at the sink (spans %v) is not the next record of either partition (next: %v)", i, spanIDs(t, b), next)
		}
		next[p]++
	}
	skipped := -skippedBefore
	for r := range numSkipReasons {
		skipped += testutil.ToFloat64(skippedC[r])
	}
	if skipped != 0 {
		t.Errorf("%v records skipped, want none", skipped)
	}
	if n := testutil.ToFloat64(fetchErrors) - errorsBefore; n != 0 {
		t.Errorf("%v fetch errors counted, want none (a batch put off is not one)", n)
	}
	if !strings.Contains(logs.String(), "max-buffered-bytes") {
		t.Errorf("no line logged of the batches put off:\n%s", logs.String())
	}
}

// countingDecompressor answers every batch with out and counts the calls.
type countingDecompressor struct {
	calls int
	out   []byte
}

func (d *countingDecompressor) Decompress([]byte, kgo.CompressionCodecType) ([]byte, error) {
	d.calls++
	return d.out, nil
}

// What the budget counts as held: each broker's batches read since its last fetch was
// written, left out once stale; a compressed batch is put off while that reaches the bound,
// never an uncompressed one, and one is read when nothing is held whatever the bound.
func TestFetchBudgetHeld(t *testing.T) {
	inner := &countingDecompressor{out: []byte("records")}
	b := &fetchBudget{max: 100, inner: inner, reading: map[int32]brokerReading{}}
	read := func(node int32, n int) {
		b.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: node}, "otlp_spans", 0, kgo.FetchBatchMetrics{UncompressedBytes: n})
	}
	write := func(node int32, key int16) { b.OnBrokerWrite(kgo.BrokerMetadata{NodeID: node}, key, 10, 0, 0, nil) }
	decompress := func() error {
		_, err := b.Decompress([]byte("x"), kgo.CodecZstd)
		return err
	}

	if err := decompress(); err != nil {
		t.Fatalf("nothing held: %v", err)
	}
	read(1, 60)
	read(2, 30)
	if got := b.held(); got != 90 {
		t.Fatalf("held %d after 60 and 30 read from two brokers, want 90", got)
	}
	if err := decompress(); err != nil {
		t.Fatalf("90 of 100 held: %v", err)
	}
	read(1, 10)
	before := inner.calls
	if err := decompress(); !errors.Is(err, errDeferred) {
		t.Fatalf("100 of 100 held: %v, want errDeferred", err)
	}
	if inner.calls != before {
		t.Fatal("a batch put off was decompressed")
	}
	if _, err := b.Decompress([]byte("x"), kgo.CodecNone); err != nil {
		t.Fatalf("an uncompressed batch was put off: %v", err)
	}
	write(1, 3) // a Metadata request: no new fetch
	if got := b.held(); got != 100 {
		t.Fatalf("held %d after a metadata request, want 100", got)
	}
	write(1, fetchKey)
	if got := b.held(); got != 30 {
		t.Fatalf("held %d after broker 1's next fetch, want broker 2's 30", got)
	}
	b.mu.Lock()
	r := b.reading[2]
	r.at = r.at.Add(-readingStale)
	b.reading[2] = r
	b.mu.Unlock()
	if got := b.held(); got != 0 {
		t.Fatalf("held %d with broker 2's read gone stale, want 0", got)
	}

	small := &fetchBudget{max: 1 << 10, inner: inner, reading: map[int32]brokerReading{}}
	if _, err := small.Decompress(make([]byte, 8<<10), kgo.CodecGzip); err != nil {
		t.Fatalf("a batch past the bound with nothing held: %v", err)
	}
}

// bufferedWatch follows what the client holds of fetched records from its own hooks, record by
// record as they are buffered and taken, and keeps the most it held.
type bufferedWatch struct {
	now, most atomic.Int64
}

func heldBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

func (w *bufferedWatch) OnFetchRecordBuffered(r *kgo.Record) {
	n := w.now.Add(heldBytes(r))
	for m := w.most.Load(); n > m && !w.most.CompareAndSwap(m, n); m = w.most.Load() {
	}
}

func (w *bufferedWatch) OnFetchRecordUnbuffered(r *kgo.Record, _ bool) { w.now.Add(-heldBytes(r)) }

// A hostile producer beside a well-behaved one: partition 0 gets 40 zstd batches of 1MiB of
// zeros each (a few hundred bytes on the wire, under every per-batch and per-record bound,
// and not OTLP), partition 1 ten OTLP requests. The consumer runs freely; record by record
// (the client's own hooks), its client never holds more than -kafka.consume.max-buffered-bytes
// and one batch (without the budget it held the 40MiB of zeros of one fetch at once). Every request of
// partition 1 is delivered in order, each record of zeros is skipped as undecodable, and
// both partitions are committed to their ends.
func TestConsumeBufferedBytesHostileBeside(t *testing.T) {
	kc := newCluster(t, 2)
	const bombs, goods, zeros = 40, 10, 1 << 20
	produce, done := batchProducer(t, kc)
	var want [][]byte
	for i := range bombs {
		produce(0, make([]byte, zeros))
		if i%4 == 0 {
			v := blobRequest(t, byte(i), 100)
			produce(1, v)
			want = append(want, v)
		}
	}
	done()
	if len(want) != goods {
		t.Fatalf("produced %d good records, want %d", len(want), goods)
	}

	cfg := kfakeConfig(kc, "hostile")
	cfg.MaxRecordBytes = 2 << 20
	cfg.MaxBatchBytes = 2 << 20
	cfg.MaxBufferedBytes = 3 << 20
	undecodableBefore := testutil.ToFloat64(skippedC[skipUndecodable])

	var in sink
	var logs testkit.LockedBuffer
	var watch bufferedWatch
	c, err := New(cfg, &in, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.extraOpts = []kgo.Opt{kgo.WithHooks(&watch)}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		return fmt.Sprintf("%d of %d requests at the sink, %v of %d records of zeros skipped", len(in.taken()), goods,
			testutil.ToFloat64(skippedC[skipUndecodable])-undecodableBefore, bombs)
	}, func() bool {
		return len(in.taken()) == goods && testutil.ToFloat64(skippedC[skipUndecodable])-undecodableBefore == bombs
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	if most, bound := watch.most.Load(), int64(cfg.MaxBufferedBytes+cfg.MaxBatchBytes); most > bound || most < zeros {
		t.Errorf("the client held up to %d bytes of fetched records, want 1MiB..%d", most, bound)
	}
	got := in.taken()
	if len(got) != goods {
		t.Fatalf("the sink took %d requests, want %d", len(got), goods)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("request %d at the sink (spans %v) is not record %d of partition 1 (spans %v)", i, spanIDs(t, got[i]), i, spanIDs(t, want[i]))
		}
	}
	for p, end := range map[int32]int64{0: bombs, 1: goods} {
		if o := committedOffsetOf(t, kc, "hostile", p); o != end {
			t.Errorf("partition %d committed at %d, want %d", p, o, end)
		}
	}
}

// The budget's decompressor, taken from a probe client (newFetchBudget), reads what franz-go's
// producers write in each codec and is bounded: a batch past -kafka.consume.max-batch-bytes is
// kgo's ErrMaxDecompress, which the client turns into ErrDecompressTooLarge (the skip of
// TestConsumeBatchPastMaxBatchBytes). Were the probe to give kgo's unbounded default, the
// second case would decompress.
func TestBatchDecompressorCodecs(t *testing.T) {
	b, err := newFetchBudget(1<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	fits := blobRequest(t, 1, 32<<10)
	past := make([]byte, 64<<10+1)
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		comp, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			in      []byte
			tooMuch bool
		}{{fits, false}, {past, true}} {
			var buf bytes.Buffer
			z, typ := comp.Compress(&buf, tc.in)
			out, err := b.Decompress(z, typ)
			switch {
			case tc.tooMuch && !errors.Is(err, kgo.ErrMaxDecompress):
				t.Errorf("codec %d, %d bytes past the 64KiB bound: %v, want ErrMaxDecompress", typ, len(tc.in), err)
			case !tc.tooMuch && (err != nil || !bytes.Equal(out, tc.in)):
				t.Errorf("codec %d, %d bytes: %d bytes back, %v", typ, len(tc.in), len(out), err)
			}
		}
	}
}
