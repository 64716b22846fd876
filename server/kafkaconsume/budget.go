package kafkaconsume

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// errDeferred is what the budget answers for a batch it does not let the client decompress
// now: the client holds -kafka.consume.max-buffered-bytes already. Wrapped by the client, it
// reaches the poll loop only as a partition's error when the batch was the first of its
// partition in the fetch.
var errDeferred = errors.New("kafka consumer: batch put off, the client holds -kafka.consume.max-buffered-bytes of fetched records")

// readingStale is how long a broker's count of batches read stays in what the client holds
// when no batch of it was read since: a fetch response is read batch after batch without a
// pause, so after this long it was buffered (and is counted there) or dropped.
const readingStale = time.Second

// fetchKey is the Kafka API key of Fetch requests.
const fetchKey = 1

// fetchBudget bounds what fetched records take decompressed inside the Kafka client before
// the poll loop takes them (-kafka.consume.max-buffered-bytes). -kafka.consume.max-batch-bytes
// bounds one batch and -kafka.consume.fetch-max-bytes the compressed bytes of a fetch, but a
// fetch can carry thousands of small compressed batches each just under the batch bound:
// gzip or zstd zeros a broken or hostile producer writes would decompress to many GiB in the
// client before the poll loop saw a record.
//
// It is the client's decompressor and two of its hooks. Before a compressed batch is
// decompressed, what the client holds is compared with the budget; when it reached it, the
// batch is not decompressed now (errDeferred, counted). A batch after others of its partition
// in the same fetch ends what that fetch brings of the partition: the client keeps the
// records before it and fetches it again with the partition's next fetch. A partition's first
// batch comes to the poll loop as the partition's error, which it counts no further and passes
// over; the client fetches the batch again after that poll. Nothing is skipped: the batch is
// read once the poll loop took what the client held.
//
// What the client holds is the records of the fetches it buffered (BufferedFetchBytes: keys,
// values and headers not yet polled) and the batches of the fetch responses it is reading,
// not yet buffered, counted per broker: a broker's count grows with each batch read from it
// (HookFetchBatchRead) and starts again when the next fetch is written to it (HookBrokerWrite;
// the client sends a broker its next fetch only once the last one was taken), and a count
// that has not grown for readingStale is left out. Until the broker's next fetch a buffered
// response is counted twice, which errs on the side of the bound.
//
// The check comes before a batch is decompressed, so what the client holds passes the budget
// by at most one batch (-kafka.consume.max-batch-bytes) per broker read at once; and a batch
// is never put off while the client holds nothing, so every batch is read in the end.
type fetchBudget struct {
	max      int64
	inner    kgo.Decompressor // the client's own, bounded at -kafka.consume.max-batch-bytes
	cl       atomic.Pointer[kgo.Client]
	deferred atomic.Int64 // batches put off since the start, for the poll loop's log line

	mu      sync.Mutex
	reading map[int32]brokerReading // by broker node id
}

// brokerReading is what was read of a broker's fetch response so far, and when last.
type brokerReading struct {
	bytes int64
	at    time.Time
}

var (
	_ kgo.Decompressor       = (*fetchBudget)(nil)
	_ kgo.HookFetchBatchRead = (*fetchBudget)(nil)
	_ kgo.HookBrokerWrite    = (*fetchBudget)(nil)
)

// newFetchBudget is a budget of max bytes over the client's own decompressor bounded at
// maxBatch bytes a batch, which kgo builds only for a client of its own making.
func newFetchBudget(max int64, maxBatch int) (*fetchBudget, error) {
	probe, err := kgo.NewClient(kgo.MaxDecompressBatchBytes(maxBatch))
	if err != nil {
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	defer probe.Close()
	inner, ok := probe.OptValue(kgo.WithDecompressor).(kgo.Decompressor)
	if !ok || inner == nil {
		return nil, errors.New("kafka consumer: the client has no decompressor to bound")
	}
	return &fetchBudget{max: max, inner: inner, reading: map[int32]brokerReading{}}, nil
}

// Decompress decompresses src with the client's decompressor unless the client holds the
// budget already.
func (b *fetchBudget) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec != kgo.CodecNone && b.held() >= b.max {
		b.deferred.Add(1)
		deferredBatches.Inc()
		return nil, errDeferred
	}
	return b.inner.Decompress(src, codec)
}

// held is what the client holds of fetched records, as the type's comment counts it.
func (b *fetchBudget) held() int64 {
	var n int64
	if cl := b.cl.Load(); cl != nil {
		n = cl.BufferedFetchBytes()
	}
	now := time.Now()
	b.mu.Lock()
	for _, r := range b.reading {
		if now.Sub(r.at) < readingStale {
			n += r.bytes
		}
	}
	b.mu.Unlock()
	return n
}

// OnFetchBatchRead counts a batch read from a broker's fetch response (compressed or not: an
// uncompressed one is the response's own bytes).
func (b *fetchBudget) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b.mu.Lock()
	r := b.reading[meta.NodeID]
	r.bytes += int64(m.UncompressedBytes)
	r.at = time.Now()
	b.reading[meta.NodeID] = r
	b.mu.Unlock()
}

// OnBrokerWrite starts a broker's count again at each fetch written to it.
func (b *fetchBudget) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key != fetchKey {
		return
	}
	b.mu.Lock()
	delete(b.reading, meta.NodeID)
	b.mu.Unlock()
}
