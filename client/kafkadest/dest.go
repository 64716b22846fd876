package kafkadest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

var (
	ackedRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafkadest_acknowledged_records_total",
		Help: "Records of the Kafka destinations that the brokers acknowledged (acks=all).",
	}, []string{"destination"})
	failedRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafkadest_failed_records_total",
		Help: "Records of the Kafka destinations that failed, by reason: retryable (produced again after the backoff: a broker down, a leader moving, a timeout), too_large (above the topic's max.message.bytes), invalid (refused for good by the brokers).",
	}, []string{"destination", "reason"})
	cutEntries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafkadest_cut_entries_total",
		Help: "Resource entries larger than max-message-bytes that the Kafka destinations cut into several records between their scope entries or items.",
	}, []string{"destination"})
)

// recordOverhead is what a record batch holding one record adds to the record's value: the
// batch header (61 bytes), the record's lengths, deltas and attributes (at most 31), its key
// (a trace id in hex, 32) and room to spare. A value of max-message-bytes less this always
// fits a batch of its own.
const recordOverhead = 256

// Reasons of otlpgate_kafkadest_failed_records_total.
const (
	failRetryable = iota
	failTooLarge
	failInvalid
	numFails
)

var failNames = [numFails]string{"retryable", "too_large", "invalid"}

// Dest is the Kafka destination. It implements pipeline.Destination.
//
// Invariants:
//  1. held is the bytes of every batch taken and not finished: queued, being produced,
//     waiting for a retry; sending counts the sends past the queue whose records the
//     producer has not all handed back.
//  2. A batch is finished exactly once (finishBatch): after every record of its last attempt
//     was answered (settle), at the shutdown deadline while it waits for a retry, or at
//     retry-max-elapsed (expire), while the producer may still hold its records.
//  3. A send is put back exactly once (release), after its batch was finished and the
//     producer handed back every record: by settle, or by expire when settle came while it
//     was finishing the batch (sendAbandoning, returned).
//  4. A send waiting for a retry is in mu.waiting until resend, expire or Shutdown takes it
//     out; whoever takes it out owns it.
type Dest struct {
	cfg     Config
	log     *slog.Logger
	cl      *kgo.Client
	queue   chan *pipeline.Batch
	held    atomic.Int64
	sending atomic.Int64
	limit   atomic.Int64
	counts  *client.Counts
	unhold  func()
	promise func(*kgo.Record, error) // onRecord, made once: a method value allocates
	// ctx ends when Shutdown gives up: Produce stops waiting for room in kgo's buffer, and
	// the start's question of the topics' limits (closing learned) ends.
	ctx     context.Context
	cancel  context.CancelFunc
	learned chan struct{}

	// limits is each signal's largest record batch: MaxMessageBytes, or its topic's
	// max.message.bytes when the brokers said it is smaller (limit.go).
	limits [fastpath.NumSignals]atomic.Int64

	acked  prometheus.Counter
	failed [numFails]prometheus.Counter
	cuts   prometheus.Counter

	errMu   sync.Mutex
	lastErr string
	errAt   time.Time
	failing atomic.Bool // a failure since the last delivery: the next delivery logs the recovery

	mu struct {
		sync.Mutex
		closed   bool
		stopping bool // the shutdown deadline passed: failures are losses
		waiting  map[*send]*time.Timer
	}
	active sync.WaitGroup // sends not finished
	lost   atomic.Int64   // items lost at shutdown
	stop   chan struct{}  // closed by Shutdown: produce what is queued, then return
	done   chan struct{}  // closed when the sender returned

	// tenants holds each tenant's record headers (forward-headers), made once per tenant.
	tenants struct {
		sync.RWMutex
		m map[uint32]tenantHeaders
	}

	// finish ends a batch: Done, or Reject for one the brokers refused for good; tests
	// replace it to see when it runs.
	finish func(b *pipeline.Batch, delivered, rejected bool)
}

// New builds the destination and its producer; it connects to the brokers as the first
// records go.
func New(cfg Config, log *slog.Logger) (*Dest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dest{cfg: cfg, log: log, queue: make(chan *pipeline.Batch, 4096), learned: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}), counts: client.NewCounts(cfg.Name),
		acked: ackedRecords.WithLabelValues(cfg.Name), cuts: cutEntries.WithLabelValues(cfg.Name),
		finish: finishBatch}
	for r := range d.failed {
		d.failed[r] = failedRecords.WithLabelValues(cfg.Name, failNames[r])
	}
	d.promise = d.onRecord
	d.limit.Store(cfg.QueueBytes)
	for i := range d.limits {
		d.limits[i].Store(int64(cfg.MaxMessageBytes))
	}
	d.mu.waiting = map[*send]*time.Timer{}
	opts, err := d.producerOpts()
	if err != nil {
		return nil, err
	}
	if d.cl, err = kgo.NewClient(opts...); err != nil {
		return nil, fmt.Errorf("kafkadest: destination %q: %w", cfg.Name, err)
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.unhold = d.counts.Hold(&d.held, &d.sending)
	go func() {
		defer close(d.learned)
		d.learnLimits()
	}()
	go d.run()
	return d, nil
}

func finishBatch(b *pipeline.Batch, delivered, rejected bool) {
	if rejected {
		b.Reject()
		return
	}
	b.Done(delivered)
}

// producerOpts is the producer of cfg: idempotent (kgo's default), acks from every in-sync
// replica, batches of at most MaxMessageBytes.
func (d *Dest) producerOpts() ([]kgo.Opt, error) {
	cfg := d.cfg
	opts := []kgo.Opt{
		kgo.WithHooks(brokerHooks{d}),
		// kgo's own buffer is bounded like the destination's queue: a Produce past it waits,
		// and the queue behind it refuses batches at hand-over.
		kgo.MaxBufferedBytes(int(min(cfg.QueueBytes, 1<<40))),
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("otlpgate"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Read when the producer first meets a partition, which the sender holds back until
		// the topics' max.message.bytes are known (limit.go).
		kgo.ProducerBatchMaxBytesFn(d.batchMaxBytes),
		kgo.RecordPartitioner(partitioner(cfg.ByTraceID || cfg.ByResource)),
		// The pipeline has batched already (-batch.*): a record waiting for more in the
		// producer (kgo's default linger, 10ms) is latency for nothing, and an -ack=upstream
		// client waits it out on every request. Records that come while a request is in
		// flight still share the next one.
		kgo.ProducerLinger(0),
		// kgo refuses a delivery timeout below a second.
		kgo.RecordDeliveryTimeout(max(cfg.DeliveryTimeout, time.Second)),
	}
	switch cfg.Compression {
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS))
	}
	var m sasl.Mechanism
	switch cfg.SASLMechanism {
	case client.KafkaSASLPlain:
		m = plain.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsMechanism()
	case client.KafkaSASLScramSHA256:
		m = scram.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsSha256Mechanism()
	case client.KafkaSASLScramSHA512:
		m = scram.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsSha512Mechanism()
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// brokerHooks tells the destination of failed connections, reads and writes: the producer
// retries them by itself, and may hold records for as long as the brokers are unreachable
// without failing them, so that these are the only sign of an outage until then.
type brokerHooks struct{ d *Dest }

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h brokerHooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.d.brokerFailed(meta, err)
	}
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (h brokerHooks) OnBrokerRead(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.d.brokerFailed(meta, err)
	}
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h brokerHooks) OnBrokerWrite(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.d.brokerFailed(meta, err)
	}
}

// brokerFailed records a broker's failure as the last error, and logs the first of an outage.
// A failure while the destination has nothing on its way is left out: brokers close idle
// connections (connections.max.idle.ms), which reads as an error and costs nothing.
func (d *Dest) brokerFailed(meta kgo.BrokerMetadata, err error) {
	if d.sending.Load() == 0 {
		return
	}
	d.setLastError(fmt.Sprintf("broker %s:%d: %v", meta.Host, meta.Port, err))
	if !d.failing.Swap(true) {
		d.log.Error("kafka destination cannot reach a broker; the producer retries", "destination", d.cfg.Name, "broker", fmt.Sprintf("%s:%d", meta.Host, meta.Port), "err", err)
	}
}

// Name implements pipeline.Destination.
func (d *Dest) Name() string { return d.cfg.Name }

// SetQueueBytes changes the queue bound in place. Safe for concurrent use.
func (d *Dest) SetQueueBytes(n int64) { d.limit.Store(n) }

// LastError returns the latest failure and when it happened; "" when there was none. Safe for
// concurrent use.
func (d *Dest) LastError() (string, time.Time) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.lastErr, d.errAt
}

func (d *Dest) setLastError(msg string) {
	d.errMu.Lock()
	d.lastErr, d.errAt = msg, time.Now()
	d.errMu.Unlock()
}

// Enqueue implements pipeline.Destination. Safe for concurrent use.
func (d *Dest) Enqueue(b *pipeline.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return pipeline.ErrClosed
	}
	n := int64(b.Len())
	if d.held.Load()+n > d.limit.Load() {
		return pipeline.ErrFull
	}
	d.held.Add(n)
	select {
	case d.queue <- b:
		return nil
	default:
		d.held.Add(-n)
		return pipeline.ErrFull
	}
}

// batchMaxBytes is the record batch bound of topic, for the producer.
func (d *Dest) batchMaxBytes(topic string) int32 {
	for sig, t := range d.cfg.Topics {
		if t == topic {
			return int32(d.limits[sig].Load())
		}
	}
	return int32(d.cfg.MaxMessageBytes)
}

// run hands each queued batch's records to the producer; after Shutdown it hands over what is
// still queued, then returns. It starts once the topics' limits are known (or could not be).
func (d *Dest) run() {
	defer close(d.done)
	select {
	case <-d.learned:
	case <-d.stop:
		<-d.learned // Shutdown's deadline ends it
	}
	for {
		select {
		case b := <-d.queue:
			d.start(b)
		case <-d.stop:
			for {
				select {
				case b := <-d.queue:
					d.start(b)
				default:
					return
				}
			}
		}
	}
}

// start cuts b into records and produces them.
func (d *Dest) start(b *pipeline.Batch) {
	s := getSend()
	s.d, s.b, s.signal, s.took, s.state = d, b, b.Signal, time.Now(), sendProducing
	d.active.Add(1)
	d.sending.Add(1)
	if err := s.build(); err != nil {
		d.failed[failInvalid].Inc()
		d.setLastError(fmt.Sprintf("cannot cut a %s batch into records: %v", b.Signal, err))
		d.log.Warn("kafka destination drops a batch it cannot cut into records", "destination", d.cfg.Name, "signal", b.Signal.String(), "err", err)
		d.end(s, client.DropInvalid, true)
		return
	}
	if len(s.recs) == 0 {
		d.end(s, client.DropTooLarge, true) // every item was too large
		return
	}
	// Armed once the send is built: its timer may give the batch up from here on.
	d.arm(s)
	d.produce(s, s.recs)
}

// produce hands recs, records of s, to the producer.
func (d *Dest) produce(s *send, recs []*kgo.Record) {
	s.pending.Store(int32(len(recs)))
	for _, r := range recs {
		d.cl.Produce(d.ctx, r, d.promise)
	}
}

// onRecord is the producer's answer for one record. kgo calls it serially, from its own
// goroutine; it must not block.
func (d *Dest) onRecord(r *kgo.Record, err error) {
	s := r.Context.(*send)
	if err == nil {
		d.acked.Inc()
	} else {
		s.mu.Lock()
		s.retry = append(s.retry, r)
		if s.err == nil {
			s.err = err
		}
		switch {
		case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
			s.refused, s.refusal = true, client.DropTooLarge
		case permanent(err):
			s.refused, s.refusal = true, client.DropRejected
		}
		s.mu.Unlock()
	}
	if s.pending.Add(-1) == 0 {
		d.settle(s)
	}
}

// permanent reports an error that producing the record again cannot fix.
func permanent(err error) bool {
	for _, e := range []error{kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTopicException,
		kerr.PolicyViolation, kerr.UnsupportedCompressionType, kerr.InvalidRequiredAcks} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// settle decides a send's fate once every record of its attempt was answered: delivered,
// refused for good, produced again after the backoff, or given up on.
func (d *Dest) settle(s *send) {
	// Every record of the attempt has answered: nothing else touches s's records until it is
	// produced again, so they need no lock from here.
	d.mu.Lock()
	switch s.state {
	case sendAbandoning:
		// expire is finishing the batch; it puts s back when done.
		s.returned = true
		d.mu.Unlock()
		return
	case sendAbandoned:
		d.mu.Unlock()
		d.release(s) // its batch was given up at retry-max-elapsed; the records are back
		return
	}
	s.state = sendSettling // retry-max-elapsed leaves it to settle from here
	d.mu.Unlock()
	if len(s.retry) == 0 {
		if d.failing.Swap(false) {
			d.log.Warn("kafka destination delivers again", "destination", d.cfg.Name)
		}
		d.end(s, 0, false)
		return
	}
	topic := s.retry[0].Topic
	if s.refused {
		reason := failInvalid
		if s.refusal == client.DropTooLarge {
			reason = failTooLarge
		}
		d.failed[reason].Add(float64(len(s.retry)))
		d.setLastError(fmt.Sprintf("produce to %s: %v", topic, s.err))
		if s.refusal == client.DropTooLarge {
			d.log.Error("kafka destination drops a batch: the brokers refuse its records as too large; the topic's max.message.bytes was lowered below what the destination read at start: restart otlpgate, or lower max-message-bytes", "destination", d.cfg.Name, "topic", topic, "err", s.err)
		} else {
			d.log.Warn("kafka destination drops a batch the brokers refused", "destination", d.cfg.Name, "topic", topic, "err", s.err)
		}
		d.end(s, s.refusal, true)
		return
	}
	d.failed[failRetryable].Add(float64(len(s.retry)))
	d.setLastError(fmt.Sprintf("produce to %s: %v", topic, s.err))
	if !d.failing.Swap(true) {
		d.log.Error("kafka destination cannot deliver; it produces the records again after a backoff", "destination", d.cfg.Name, "topic", topic, "err", s.err)
	}
	s.attempts++
	delay := d.backoff(s.attempts)
	if max := d.cfg.RetryMaxElapsed; max > 0 && time.Since(s.took)+delay > max {
		d.end(s, client.DropRetryExhausted, false)
		return
	}
	d.mu.Lock()
	if d.mu.stopping {
		d.mu.Unlock()
		d.end(s, client.DropShutdownPending, false)
		return
	}
	d.counts.Retried(client.RetryFailed)
	s.state = sendWaiting
	d.mu.waiting[s] = time.AfterFunc(delay, func() { d.resend(s) })
	d.mu.Unlock()
}

// arm starts s's retry-max-elapsed clock. The timer and its closure are made per batch: a
// batch, not a record, and only with a budget (a spool's destinations have none).
func (d *Dest) arm(s *send) {
	if d.cfg.RetryMaxElapsed <= 0 {
		return
	}
	d.mu.Lock()
	gen := s.gen
	d.mu.Unlock()
	s.timer = time.AfterFunc(max(d.cfg.RetryMaxElapsed-time.Since(s.took), 0), func() { d.expire(s, gen) })
}

// expire gives up s's batch at retry-max-elapsed. One waiting for a retry ends at once. One
// whose records the producer holds cannot take them back: an idempotent producer keeps
// retrying a request it sent until it knows the brokers' answer, and failing them before
// would risk a gap in the partition's sequence. Its batch is given up (the client of
// -ack=upstream is answered with the failure) and counted, while the send keeps its own
// reference to the payload the records point into until the producer hands them back; they
// may still be delivered, a duplicate of what the client sends again.
func (d *Dest) expire(s *send, gen uint64) {
	d.mu.Lock()
	if s.gen != gen {
		d.mu.Unlock()
		return // the batch ended meanwhile; s may serve another one now
	}
	switch s.state {
	case sendWaiting:
		t := d.mu.waiting[s]
		delete(d.mu.waiting, s)
		d.mu.Unlock()
		t.Stop()
		d.end(s, client.DropRetryExhausted, false)
		return
	case sendProducing:
		s.state = sendAbandoning
		s.gen++
		s.keep = s.b.Payload.Retain()
		d.mu.Unlock()
		d.setLastError(fmt.Sprintf("%d records of a %s batch unacknowledged after retry-max-elapsed %v", len(s.recs), d.cfg.Topics[s.signal], d.cfg.RetryMaxElapsed))
		d.finishBatch(s, client.DropRetryExhausted, false)
		d.mu.Lock()
		back := s.returned // the producer handed every record back meanwhile
		s.state = sendAbandoned
		d.mu.Unlock()
		if back {
			d.release(s)
		}
		return
	}
	d.mu.Unlock()
}

// backoff is the delay before attempt n (1 for the first retry): exponential from
// RetryInitial to RetryMax, with jitter down to half of it.
func (d *Dest) backoff(n int) time.Duration {
	delay := d.cfg.RetryInitial
	for i := 1; i < n && delay < d.cfg.RetryMax; i++ {
		delay *= 2
	}
	delay = min(delay, d.cfg.RetryMax)
	return delay/2 + rand.N(delay/2+1)
}

// resend produces again the records of s that failed, once its backoff is over.
func (d *Dest) resend(s *send) {
	d.mu.Lock()
	if _, ok := d.mu.waiting[s]; !ok {
		d.mu.Unlock()
		return // Shutdown took it
	}
	delete(d.mu.waiting, s)
	s.state = sendProducing
	d.mu.Unlock()
	s.again = append(s.again[:0], s.retry...)
	clear(s.retry)
	s.retry, s.err, s.refused = s.retry[:0], nil, false
	for _, r := range s.again {
		// What the producer set on the failed attempt goes; the partitioner picks again.
		*r = kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Context: s}
	}
	d.produce(s, s.again)
}

// end finishes s's batch and puts s back.
func (d *Dest) end(s *send, reason client.DropReason, rejected bool) {
	d.mu.Lock()
	s.gen++ // a retry-max-elapsed timer that fires now finds the batch ended
	d.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	d.finishBatch(s, reason, rejected)
	d.release(s)
}

// finishBatch finishes s's batch: delivered with reason 0 and not rejected (DropRejected is
// 0 too, and always comes with rejected), else dropped for reason (rejected: the brokers
// refused it for good) or, at shutdown, returned to the spool when it keeps it.
func (d *Dest) finishBatch(s *send, reason client.DropReason, rejected bool) {
	b := s.b
	s.b = nil
	items := b.Items
	delivered := reason == 0 && !rejected
	if delivered && s.cut.tooLarge > 0 {
		// The rest went; the items larger than a record on their own cannot.
		d.counts.Dropped(client.DropTooLarge.String(), s.cut.tooLarge)
		d.failed[failTooLarge].Add(float64(s.cut.tooLarge))
		d.counts.Delivered(items-s.cut.tooLarge, b.Len())
		delivered, rejected = false, true
	} else if delivered {
		d.counts.Delivered(items, b.Len())
	} else if reason.AtShutdown() && b.Kept() {
		d.counts.Returned(items)
	} else {
		d.counts.Dropped(reason.String(), items)
		if reason.AtShutdown() {
			d.lost.Add(int64(items))
		}
	}
	d.held.Add(-int64(b.Len()))
	d.finish(b, delivered, rejected)
}

// release puts s back once its batch is finished and the producer handed back its records.
func (d *Dest) release(s *send) {
	// In flight until the producer handed the records back, a given-up batch's too: the
	// status shows a destination whose records wait for the brokers as holding data.
	d.sending.Add(-1)
	if s.keep != nil {
		s.keep.Release()
		s.keep = nil
	}
	putSend(s)
	d.active.Done()
}

// Shutdown stops taking batches and waits, until ctx ends, for the brokers to acknowledge
// what the destination holds; then it gives up on the rest: counted as lost by reason, or,
// for a spool's batches, left in the spool. The error reports what was lost, nil when nothing
// was. Safe to call once, from any goroutine.
func (d *Dest) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.mu.closed = true
	d.mu.Unlock()
	close(d.stop)
	drained := make(chan struct{})
	go func() {
		<-d.done
		d.active.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		d.cancel()
		d.cl.Close()
	case <-ctx.Done():
		d.cancel() // ends the question of the topics' limits too
		d.mu.Lock()
		d.mu.stopping = true
		waiting := d.mu.waiting
		d.mu.waiting = map[*send]*time.Timer{}
		d.mu.Unlock()
		for s, t := range waiting {
			t.Stop()
			d.end(s, client.DropShutdownRetry, false)
		}
		// Close fails the records kgo still holds, those of abandoned sends too; their sends
		// end as losses.
		d.cl.Close()
		<-drained
	}
	d.unhold()
	if n := d.lost.Load(); n > 0 {
		return fmt.Errorf("kafkadest: %d items not acknowledged by the brokers before the shutdown deadline", n)
	}
	return nil
}
