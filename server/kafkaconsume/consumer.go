package kafkaconsume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// Admitter is what the consumer admits into: the pipeline (pipeline.Pipeline.AdmitDelivered),
// or with a spool its admission, whose records are durable once admitted.
type Admitter interface {
	// AdmitDelivered admits req and returns the batch that holds it, with a reference the
	// caller drops with Unref once the batch ended; nil when there is nothing to wait for
	// (the spool made the request durable, or processing dropped it). req's bytes are only
	// read during the call. Safe for concurrent use.
	AdmitDelivered(req pipeline.Request) (*pipeline.Batch, error)
	// RetryDelay is how long to wait after ErrFull. Safe for concurrent use.
	RetryDelay() time.Duration
	// Fill is what the queue the consumer shares with the other intakes holds, and its
	// bound (0: none); Config.QueueShare is taken of it. Safe for concurrent use.
	Fill() (used, limit int64)
}

// Consumer is the Kafka consumer intake. New builds it, Start joins the group, Shutdown leaves
// it once what was admitted is delivered (or its time is up) and committed.
type Consumer struct {
	cfg    Config
	in     Admitter
	log    *slog.Logger
	topics map[string]*Topic
	cl     *kgo.Client
	budget *fetchBudget // the client's decompressor: -kafka.consume.max-buffered-bytes
	// extraOpts are more options for the client: tests add hooks that watch it.
	extraOpts []kgo.Opt

	pollCtx  context.Context
	stopPoll context.CancelFunc
	wake     atomic.Pointer[context.CancelFunc] // ends the poll under way: a rewind waits for it
	// rebalancing is set when the group wants to rebalance while the poll loop holds its
	// records (kgo's OnPartitionsCallbackBlocked), cleared when it lets the rebalance run.
	rebalancing atomic.Bool
	waitedAt    atomic.Int64  // unix nanoseconds of the poll loop's last wait for room
	done        chan struct{} // closed when run returns
	stopCommit  chan struct{}
	commitDone  chan struct{}
	watchDone   chan struct{}
	closing     chan struct{} // closed when Shutdown begins: a revoke then waits for nothing
	shutOnce    sync.Once

	mu struct {
		sync.Mutex
		parts map[partKey]*partition
	}

	// Owned by the poll goroutine.
	skips    []kgo.ErrDecompressTooLarge // batches skipped in this poll, for applyRewinds
	dec      decoder
	retry    *time.Timer
	lastLog  time.Time
	unlogged int
	// The budget's count of batches put off at the last poll, and at the last line logged of
	// them, and when that was.
	deferredPoll, deferredSeen int64
	deferredLog                time.Time
}

type partKey struct {
	topic string
	id    int32
}

// New builds a consumer of cfg admitting into in; nil when cfg is off. Nothing connects
// before Start.
func New(cfg Config, in Admitter, log *slog.Logger) (*Consumer, error) {
	if !cfg.On() {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, in: in, log: log, topics: map[string]*Topic{},
		done: make(chan struct{}), stopCommit: make(chan struct{}), commitDone: make(chan struct{}), watchDone: make(chan struct{}), closing: make(chan struct{})}
	c.mu.parts = map[partKey]*partition{}
	for i := range cfg.Topics {
		c.topics[cfg.Topics[i].Name] = &cfg.Topics[i]
	}
	c.dec.init(&cfg)
	c.retry = time.NewTimer(time.Hour)
	c.retry.Stop()
	return c, nil
}

// opts are the client's options: a group member that commits by itself only (no autocommit),
// balanced cooperatively, whose revocations wait for the poll loop.
func (c *Consumer) opts() []kgo.Opt {
	names := make([]string, 0, len(c.cfg.Topics))
	for _, t := range c.cfg.Topics {
		names = append(names, t.Name)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(names...),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { c.rebalancing.Store(true) }),
		kgo.SessionTimeout(c.cfg.SessionTimeout),
		kgo.FetchMaxBytes(c.cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(min(c.cfg.FetchMaxBytes, int32(c.cfg.MaxRecordBytes)+1<<10)),
		// Checked before the client decompresses a batch, which is before any record's size;
		// the budget's decompressor is the client's own, bounded the same.
		kgo.MaxDecompressBatchBytes(c.cfg.MaxBatchBytes),
		kgo.WithDecompressor(c.budget),
		kgo.WithHooks(c.budget),
		// A group's first member reads what the topics hold, not only what comes after it
		// joined: the producers wrote those records for it.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ClientID("otlpgate"),
	}
	if c.cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.cfg.TLS))
	}
	var m sasl.Mechanism
	switch c.cfg.SASLMechanism {
	case SASLPlain:
		m = plain.Auth{User: c.cfg.SASLUser, Pass: c.cfg.SASLPassword}.AsMechanism()
	case SASLScramSHA256:
		m = scram.Auth{User: c.cfg.SASLUser, Pass: c.cfg.SASLPassword}.AsSha256Mechanism()
	case SASLScramSHA512:
		m = scram.Auth{User: c.cfg.SASLUser, Pass: c.cfg.SASLPassword}.AsSha512Mechanism()
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return append(opts, c.extraOpts...)
}

// Start makes the client and starts polling; the group is joined in the background, and the
// brokers need not be up yet. Nil-safe: a nil Consumer (off) starts nothing.
func (c *Consumer) Start() error {
	if c == nil {
		return nil
	}
	b, err := newFetchBudget(int64(c.cfg.MaxBufferedBytes), c.cfg.MaxBatchBytes)
	if err != nil {
		return err
	}
	c.budget = b
	cl, err := kgo.NewClient(c.opts()...)
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	c.cl = cl
	b.cl.Store(cl)
	c.pollCtx, c.stopPoll = context.WithCancel(context.Background())
	c.log.Info("kafka consumer started", "brokers", c.cfg.Brokers, "group", c.cfg.Group, "topics", len(c.cfg.Topics))
	go c.run()
	go c.commitLoop()
	go c.watchLoop()
	return nil
}

// run polls records and admits them, in offset order per partition, until Shutdown.
func (c *Consumer) run() {
	defer close(c.done)
	for {
		// A poll waits for records; a rewind, which is applied between polls, ends it.
		ctx, cancel := context.WithCancel(c.pollCtx)
		c.wake.Store(&cancel)
		fs := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		c.wake.Store(nil)
		cancel()
		if c.pollCtx.Err() != nil {
			// What this poll brought is not tracked: it is read again after a restart.
			c.cl.AllowRebalance()
			return
		}
		deferredOnly := fs.NumRecords() == 0
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrMaxDecompress) {
				return // a batch past MaxBatchBytes is skipped below, after the records before it
			}
			if errors.Is(err, errDeferred) {
				return // counted by the budget; the client fetches the batch again
			}
			deferredOnly = false
			fetchErrors.Inc()
			c.logLimited("kafka consumer fetch failed; the client retries", "topic", topic, "partition", p, "err", err)
		})
		stopped, yielded := false, false
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			// A batch past MaxBatchBytes ends what the fetch brought of its partition, which the
			// client fetches no more until SetOffsets moves it.
			bomb, _ := errors.AsType[*kgo.ErrDecompressTooLarge](fp.Err)
			if stopped || len(fp.Records) == 0 && bomb == nil {
				return
			}
			var first int64
			if len(fp.Records) > 0 {
				first = fp.Records[0].Offset
			} else {
				first = bomb.Offset
			}
			p := c.partitionOf(fp.Topic, fp.Partition, first, fp.HighWatermark)
			if yielded {
				// The rewind's SetOffsets lets the client fetch the batch again, and fail again.
				c.rewindTo(p, first)
				return
			}
			for _, r := range fp.Records {
				switch c.handle(p, r) {
				case handleStopped:
					stopped = true
					return
				case handleYielded:
					// The rest of this poll is read again after the rebalance, by whichever
					// member then holds its partitions.
					yielded = true
					c.rewindTo(p, r.Offset)
					return
				}
			}
			if bomb != nil {
				c.skipBatch(p, bomb)
			}
		})
		c.applyRewinds()
		c.rebalancing.Store(false)
		c.cl.AllowRebalance()
		if stopped {
			return
		}
		c.noteDeferred(deferredOnly)
	}
}

// noteDeferred logs, at most once per LogInterval, that batches were put off since the last
// line because the client held -kafka.consume.max-buffered-bytes; and when the poll brought
// nothing else (what the client holds is still being read from a broker), it waits a little
// before the next, so that the client does not fetch the batches put off again and again.
func (c *Consumer) noteDeferred(only bool) {
	n := c.budget.deferred.Load()
	if n == c.deferredPoll {
		return
	}
	c.deferredPoll = n
	if now := time.Now(); now.Sub(c.deferredLog) >= c.cfg.LogInterval {
		// Info, and a line of its own: nothing is lost, and a warning of a skipped record
		// must not wait for this one's interval.
		c.log.Info("kafka record batches put off: the client holds -kafka.consume.max-buffered-bytes of fetched records; they are fetched again once the consumer took those",
			"batches", n-c.deferredSeen, "max_buffered_bytes", c.cfg.MaxBufferedBytes)
		c.deferredSeen, c.deferredLog = n, now
	}
	if only {
		t := time.NewTimer(deferPause)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.pollCtx.Done():
		}
	}
}

// deferPause is how long the poll loop waits after a poll that brought only batches put off.
const deferPause = 10 * time.Millisecond

// partitionOf is the state of a partition, made at its assignment (or here, at its first
// record, when the assignment was not seen).
func (c *Consumer) partitionOf(topic string, id int32, first, hwm int64) *partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := partKey{topic, id}
	p := c.mu.parts[k]
	if p == nil {
		p = newPartition(topic, id, first, time.Now())
		p.lag = lag.WithLabelValues(topic, strconv.Itoa(int(id)))
		c.mu.parts[k] = p
		assignedParts.Inc()
	}
	p.fetchedLocked(first)
	p.hwm = hwm
	return p
}

// assigned runs when the group gives the consumer partitions (kgo's callback, before their
// fetches begin): each enters the watch at once, with nothing read yet, so that one whose
// leader never serves it is reported as stalled though no record of it ever arrived. kgo
// fetches the committed offsets after this callback; the watch learns them itself.
func (c *Consumer) assigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ids := range parts {
		for _, id := range ids {
			k := partKey{topic, id}
			if c.mu.parts[k] != nil {
				continue
			}
			p := newAssignedPartition(topic, id, now)
			p.lag = lag.WithLabelValues(topic, strconv.Itoa(int(id)))
			c.mu.parts[k] = p
			assignedParts.Inc()
		}
	}
}

// What handle did with a record.
type handled uint8

const (
	handleDone    handled = iota // admitted, or skipped for good
	handleStopped                // the consumer stops: not tracked, read again after a restart
	handleYielded                // a rebalance waits while admission has no room: not tracked
)

// handle admits one record, waiting while the pipeline has no room. While it waits, a
// rebalance the group wants (rebalancing) is not kept waiting: handle gives the record up
// (handleYielded) and the caller rewinds its partition to it, so that the rebalance runs and
// the record is read again after it. When the consumer stops meanwhile the record is not
// tracked either, and is read again after a restart.
func (c *Consumer) handle(p *partition, r *kgo.Record) handled {
	c.mu.Lock()
	rewinding := p.rewind >= 0
	c.mu.Unlock()
	if rewinding {
		return handleDone // read again from the rewind's offset
	}
	t := c.topics[r.Topic]
	recordBytes.Add(float64(len(r.Value)))
	req, reason, err := c.dec.decode(t, r)
	for waited := false; err == errNoRoom; req, reason, err = c.dec.decode(t, r) {
		// The intake limiter has no room for an OTLP/JSON record's protobuf form now: wait as
		// for a pipeline without room.
		backpressure.Inc()
		if !waited {
			waited = true
			c.logLimited("kafka consumer waits: the intake limiter has no room for an OTLP/JSON record's protobuf form (-intake.max-bytes)", "topic", r.Topic)
		}
		if c.rebalancing.Load() {
			return handleYielded
		}
		if !c.wait(min(c.in.RetryDelay(), 100*time.Millisecond)) {
			return handleStopped
		}
	}
	if err != nil {
		c.skip(p, r, reason, err)
		return handleDone
	}
	// The request's bytes are read only while it is admitted: an OTLP/JSON record's buffer and
	// its charge go back once handle returns.
	defer c.dec.release()
	if req.Items == 0 && len(req.Body) == 0 {
		c.track(p, r, nil) // an empty request: nothing to deliver
		return handleDone
	}
	for waited := false; ; {
		var b *pipeline.Batch
		err := errOverShare
		if !c.overShare(int64(len(req.Body))) {
			b, err = c.in.AdmitDelivered(req)
		}
		switch {
		case err == nil:
			recordsC[t.Signal].Inc()
			itemsC[t.Signal].Add(float64(req.Items))
			c.track(p, r, b)
			return handleDone
		case err == errOverShare, errors.Is(err, pipeline.ErrFull), errors.Is(err, pipeline.ErrRoutesUnwaited):
			// No room now: poll nothing until there is. The brokers keep the backlog.
			backpressure.Inc()
			if !waited {
				waited = true
				switch {
				case errors.Is(err, pipeline.ErrRoutesUnwaited):
					c.logLimited("kafka consumer waits: destinations route by resource (match=), which the consumer cannot wait on", "err", err)
				case err == errOverShare:
					c.logLimited("kafka consumer waits: the queue holds the consumer's share (-kafka.consume.queue-share); the rest is kept for the other intakes", "share", c.cfg.QueueShare)
				}
			}
			if c.rebalancing.Load() {
				return handleYielded
			}
			if !c.wait(min(c.in.RetryDelay(), 100*time.Millisecond)) {
				return handleStopped
			}
		case errors.Is(err, pipeline.ErrClosed):
			return handleStopped
		case errors.Is(err, pipeline.ErrTooLarge):
			c.skip(p, r, skipTooLarge, err)
			return handleDone
		case errors.Is(err, pipeline.ErrUnserved):
			c.skip(p, r, skipUnserved, err)
			return handleDone
		default:
			c.skip(p, r, skipUndecodable, err)
			return handleDone
		}
	}
}

// errOverShare is handle's own refusal of a record that would take the queue past the
// consumer's share (Config.QueueShare): it waits as for ErrFull.
var errOverShare = errors.New("kafkaconsume: the queue holds the consumer's share")

// overShare reports whether n more bytes would take the queue past the consumer's share. A
// queue that holds nothing takes any record, so that one larger than the share still goes.
func (c *Consumer) overShare(n int64) bool {
	used, limit := c.in.Fill()
	return limit > 0 && used > 0 && float64(used+n) > c.cfg.QueueShare*float64(limit)
}

// wait sleeps d, or until Shutdown (false). It is a wait for room: no partition stalls meanwhile.
func (c *Consumer) wait(d time.Duration) bool {
	c.waitedAt.Store(time.Now().UnixNano())
	c.retry.Reset(d)
	select {
	case <-c.retry.C:
		return true
	case <-c.pollCtx.Done():
		if !c.retry.Stop() {
			<-c.retry.C
		}
		return false
	}
}

func (c *Consumer) track(p *partition, r *kgo.Record, b *pipeline.Batch) {
	c.mu.Lock()
	p.trackLocked(r.Offset, r.LeaderEpoch, b)
	c.mu.Unlock()
}

// skip counts and logs a record that can never be admitted, and lets its partition go past it.
func (c *Consumer) skip(p *partition, r *kgo.Record, reason skipReason, err error) {
	skippedC[reason].Inc()
	c.logLimited("kafka record skipped: it can never be admitted", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"reason", skipNames[reason], "err", err)
	c.track(p, r, nil)
}

// skipBatch counts and logs a record batch that decompresses past MaxBatchBytes, which the
// client did not decompress and stopped its partition at, and lets the partition go past it:
// its offsets are tracked as one skipped record, committed as skipped records are, and
// applyRewinds moves the client past them. Called on the poll goroutine, after the records
// before the batch.
func (c *Consumer) skipBatch(p *partition, e *kgo.ErrDecompressTooLarge) {
	c.mu.Lock()
	if p.rewind >= 0 {
		// The partition is read again from an earlier record: the SetOffsets of the rewind
		// restarts it, and the batch is met again.
		c.mu.Unlock()
		return
	}
	p.trackLocked(e.NextOffset-1, e.Epoch, nil)
	c.mu.Unlock()
	c.skips = append(c.skips, *e)
	skippedC[skipBatchTooLarge].Add(float64(e.NextOffset - e.Offset))
	c.logLimited("kafka record batch skipped: it decompresses past -kafka.consume.max-batch-bytes", "topic", e.Topic, "partition", e.Partition,
		"offset", e.Offset, "next_offset", e.NextOffset, "records", e.NextOffset-e.Offset, "max_batch_bytes", c.cfg.MaxBatchBytes)
}

// logLimited logs at most one line per LogInterval, saying how many it left out before it.
// Called on the poll goroutine only.
func (c *Consumer) logLimited(msg string, args ...any) {
	now := time.Now()
	if now.Sub(c.lastLog) < c.cfg.LogInterval {
		c.unlogged++
		return
	}
	if c.unlogged > 0 {
		args = append(args, "lines_left_out", c.unlogged)
	}
	c.log.Warn(msg, args...)
	c.lastLog, c.unlogged = now, 0
}

// rewindTo makes the partition be read again from offset, the earliest of the rewinds asked.
func (c *Consumer) rewindTo(p *partition, offset int64) {
	c.mu.Lock()
	if p.rewind < 0 || offset < p.rewind {
		p.rewind = offset
	}
	c.mu.Unlock()
}

// applyRewinds makes the client fetch again from each partition's rewind offset, and past
// each batch skipBatch skipped (unless a rewind of its partition came meanwhile: the batch is
// read again after the records before it). Called on the poll goroutine before
// AllowRebalance, as kgo asks of SetOffsets in a group.
func (c *Consumer) applyRewinds() {
	var set map[string]map[int32]kgo.EpochOffset
	c.mu.Lock()
	if len(c.skips) > 0 {
		set = map[string]map[int32]kgo.EpochOffset{}
		for _, e := range c.skips {
			if set[e.Topic] == nil {
				set[e.Topic] = map[int32]kgo.EpochOffset{}
			}
			set[e.Topic][e.Partition] = kgo.EpochOffset{Epoch: e.Epoch, Offset: e.NextOffset}
		}
		clear(c.skips)
		c.skips = c.skips[:0]
	}
	for _, p := range c.mu.parts {
		if p.rewind < 0 {
			continue
		}
		if set == nil {
			set = map[string]map[int32]kgo.EpochOffset{}
		}
		if set[p.topic] == nil {
			set[p.topic] = map[int32]kgo.EpochOffset{}
		}
		set[p.topic][p.id] = kgo.EpochOffset{Epoch: -1, Offset: p.rewind}
		p.read, p.rewind = p.rewind, -1
	}
	c.mu.Unlock()
	if set != nil {
		c.cl.SetOffsets(set)
	}
}

// commitLoop commits the acknowledged offsets every CommitInterval until Shutdown.
func (c *Consumer) commitLoop() {
	defer close(c.commitDone)
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.commit(c.pollCtx, nil)
		case <-c.stopCommit:
			return
		}
	}
}

// commit commits the acknowledged offset of every partition (of only, when not nil) that moved
// past its last commit, and updates the lag.
func (c *Consumer) commit(ctx context.Context, only map[string][]int32) {
	var offs map[string]map[int32]kgo.EpochOffset // made when a partition moved: an idle tick allocates nothing
	rewind := false
	c.mu.Lock()
	for k, p := range c.mu.parts {
		if only != nil && !containsPart(only[k.topic], k.id) {
			continue
		}
		p.advanceLocked()
		rewind = rewind || p.rewind >= 0
		if p.acked > p.committed {
			if offs == nil {
				offs = map[string]map[int32]kgo.EpochOffset{}
			}
			if offs[k.topic] == nil {
				offs[k.topic] = map[int32]kgo.EpochOffset{}
			}
			offs[k.topic][k.id] = kgo.EpochOffset{Epoch: p.epoch, Offset: p.acked}
		}
		p.lag.Set(float64(p.lagLocked()))
	}
	c.mu.Unlock()
	if wake := c.wake.Load(); rewind && wake != nil {
		(*wake)()
	}
	if len(offs) == 0 {
		return
	}
	c.cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				commitErr.Inc()
				c.log.Warn("kafka consumer could not commit offsets; the next commit carries them", "err", err)
			}
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				p := c.mu.parts[partKey{t.Topic, rp.Partition}]
				eo, ok := offs[t.Topic][rp.Partition]
				if p == nil || !ok {
					continue
				}
				if rp.ErrorCode != 0 {
					commitErr.Inc()
					continue
				}
				commitOK.Inc()
				if eo.Offset > p.committed {
					p.committed = eo.Offset
				}
				p.lag.Set(float64(p.lagLocked()))
			}
		}
	})
}

func containsPart(ps []int32, id int32) bool {
	for _, p := range ps {
		if p == id {
			return true
		}
	}
	return false
}

// revoked runs when the group takes partitions away (kgo's callback, between polls): what
// they have in flight is given RevokeWait to be delivered, then their acknowledged offsets
// are committed and their state dropped; the new owner reads from there.
func (c *Consumer) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	deadline := time.Now().Add(c.cfg.RevokeWait)
	for {
		busy := false
		c.mu.Lock()
		for topic, ids := range revoked {
			for _, id := range ids {
				if p := c.mu.parts[partKey{topic, id}]; p != nil && p.advanceLocked() {
					busy = true
				}
			}
		}
		c.mu.Unlock()
		if !busy || time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-c.closing:
			deadline = time.Time{}
		case <-ctx.Done():
			deadline = time.Time{}
		}
	}
	c.commit(ctx, revoked)
	c.drop(revoked)
}

// lost runs when the group is lost (the session expired): a commit would be refused, so the
// partitions' state is dropped, and the new owner reads from the last commit.
func (c *Consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.drop(lost)
}

func (c *Consumer) drop(parts map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ids := range parts {
		for _, id := range ids {
			k := partKey{topic, id}
			if p := c.mu.parts[k]; p != nil {
				p.releaseLocked()
				delete(c.mu.parts, k)
				forgetStallLocked(p, k)
				assignedParts.Dec()
			}
		}
	}
}

// Shutdown stops polling, waits within ctx for what was admitted to be delivered, commits
// what was, and leaves the group. What was not delivered in time is not committed: the group
// reads it again. Nil-safe; later calls do nothing.
func (c *Consumer) Shutdown(ctx context.Context) error {
	if c == nil || c.cl == nil {
		return nil
	}
	var err error
	c.shutOnce.Do(func() {
		close(c.closing)
		c.stopPoll()
		<-c.done
		for {
			busy := false
			c.mu.Lock()
			for _, p := range c.mu.parts {
				if p.advanceLocked() {
					busy = true
				}
			}
			c.mu.Unlock()
			if !busy {
				break
			}
			if ctx.Err() != nil {
				err = fmt.Errorf("kafka consumer: records still in flight at shutdown are read again by the group: %w", ctx.Err())
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(c.stopCommit)
		<-c.commitDone
		<-c.watchDone
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		c.commit(cctx, nil)
		cancel()
		c.cl.Close() // leaves the group; the revoke it runs commits nothing new
		c.mu.Lock()
		for k, p := range c.mu.parts {
			p.releaseLocked()
			forgetStallLocked(p, k)
			assignedParts.Dec()
		}
		clear(c.mu.parts)
		c.mu.Unlock()
		c.log.Info("kafka consumer stopped")
	})
	return err
}

// Lag is each partition's lag now, by topic and partition, for tests. Safe for concurrent use.
func (c *Consumer) Lag() map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.mu.parts {
		if out[k.topic] == nil {
			out[k.topic] = map[int32]int64{}
		}
		out[k.topic][k.id] = p.lagLocked()
	}
	return out
}
