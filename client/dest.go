package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// ackShardBits sets 32 shards: more than the cores otlpgate runs on, so that senders and
// receivers rarely meet on a lock (acktable_bench_test.go measures it).
const ackShardBits = 5

// Dest delivers batches to one upstream (one -dest). It implements pipeline.Destination.
//
// Goroutines: stream mode runs one sender per stream slot and signal (a lane: Streams of them
// per signal), one receiver per open stream and one sweeper for ack timeouts; unary mode runs
// Concurrency workers per signal. A sender serves one signal only, so that a signal whose
// upstream stops answering never holds up another. All of them start in Start and have returned when Shutdown returns.
type Dest struct {
	cfg     Config
	backend string // the address, in a Fleet; "" for a plain destination
	log     *slog.Logger
	m       *destMetrics
	conn    *grpc.ClientConn // nil for ProtocolHTTP
	http    *httpSender      // ProtocolHTTP only
	h2      *h2Transport     // transport=otlpgate only
	methods [fastpath.NumSignals]string
	// streamOpts and unaryOpts are the call options: streams wait for the connection to be
	// ready (a lane has nothing else to do), unary calls fail fast and back off.
	streamOpts, unaryOpts []grpc.CallOption

	acks *ackTable
	q    queue

	nextID      atomic.Uint64 // last id given; advanced under q.mu so ids follow queue order
	held        atomic.Int64  // bytes of every request not yet finished (queueBytes bounds it)
	queueBytes  atomic.Int64  // the bound on held: cfg.QueueBytes until SetQueueBytes
	outstanding atomic.Int64  // requests not yet finished
	sending     atomic.Int64  // requests sent and not yet answered (otlpgate_client_in_flight_requests)
	pausedUntil atomic.Int64  // nanotime before which nothing is sent (throttle)
	acked       atomic.Uint64 // requests acknowledged, for a Fleet's health check
	probed      atomic.Uint64 // empty requests answered, evidence for the poison rules (poison.go)
	// handback, set by Handover before the destination stops, takes the requests a sender
	// holds when it stops instead of dropping them.
	handback  atomic.Pointer[func(*pipeline.Batch, bool)]
	throttled atomic.Int32  // throttles since the last success
	unserved  atomic.Uint32 // a bit per signal the upstream answered it does not serve (unserved.go)

	lastErr lastError // the latest failure, for the status page (lasterror.go)
	rejects rejectLog // the rate limit on refusal lines (rejectlog.go)
	secrets []string  // what LastError and the log lines redact: header values, the token, the endpoint's password

	// unreadableLog rate-limits the log lines of answers over max-recv-msg-size (answer.go),
	// partialLog those of partial successes and impossibleLog those of partial successes
	// outside the request's items (partial.go).
	unreadableLog, partialLog, impossibleLog everySecond

	streams struct {
		mu   sync.Mutex
		set  map[*stream]struct{} // open streams, for the sweeper
		free []*stream            // recycled streams (streampool.go)
	}
	recvq         chan *stream // idle receivers take their next stream from it (streampool.go)
	idleReceivers atomic.Int32

	// The ack sweep (stream mode) sleeps while nothing is in the ack table and no stream is
	// half-closed (sleepSweep); sweeps counts its passes, for the tests.
	sweepAsleep atomic.Bool
	sweepWake   chan struct{}
	sweeps      atomic.Int64

	// A lane that sleeps its reconnect backoff (stream mode) is woken by the destination's
	// first success (deliver): the upstream answers again, and the batch the lane holds
	// is older than what the other lanes send meanwhile. backoffWaiting is whether a lane
	// sleeps, so that a success costs one atomic load while none does; backoffWake is closed
	// by that success (answeredAfterOutage).
	backoffWaiting atomic.Bool
	// outageDelayed is whether a request waits out an outage's backoff in the retry heap
	// (retryOutage): the next success releases them (queue.releaseOutage).
	outageDelayed atomic.Bool
	backoffMu     sync.Mutex
	backoffWake   chan struct{}

	ctx       context.Context // carries the outgoing metadata; canceled when stopping
	tctx      tenantCtxs      // ctx with each tenant's forward-headers (forward.go)
	cancel    context.CancelFunc
	stop      chan struct{}                      // closed when Shutdown stops waiting: senders give up
	inFlight  [fastpath.NumSignals]chan struct{} // stream mode: a token per unacknowledged request, per signal (MaxInFlight)
	drained   chan struct{}                      // closed once nothing is outstanding after Shutdown began
	drainOnce sync.Once
	state     lifecycleState // created, running, draining, stopping, stopped (lifecycle.go)
	wg        sync.WaitGroup

	// shutdownLost counts what was given up on because Shutdown stopped waiting, by reason
	// (index: reason - DropShutdownQueued), for the one report Shutdown returns. Senders drop
	// what they hold as they stop, so this is counted at the drop, not where Shutdown sweeps.
	shutdownLost [numDropReasons - DropShutdownQueued]struct{ requests, items atomic.Int64 }
	// returned counts what Shutdown gave up on and the batches' owner keeps (drop), for the
	// line Shutdown logs.
	returned struct{ requests, items atomic.Int64 }
}

var _ pipeline.Destination = (*Dest)(nil)

var streamDesc = grpc.StreamDesc{ClientStreams: true, ServerStreams: true}

// New checks cfg, reads its files (TLS, token) and prepares the connection without dialling:
// the first stream or call dials, so a dead endpoint does not fail New or Start. log may be
// nil. Names must be unique per process: metrics are labelled by name. Safe for concurrent
// use.
func New(cfg Config, log *slog.Logger) (*Dest, error) {
	if cfg.Resolver != "" {
		return nil, fmt.Errorf("client: destination %q: resolver=%s names a fleet: use NewFleet", cfg.Name, cfg.Resolver)
	}
	return newDest(cfg, "", log)
}

// newDest builds a destination; backend is its address when it is a member of a Fleet.
func newDest(cfg Config, backend string, log *slog.Logger) (*Dest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c := cfg.compressor(); c != "" && encoding.GetCompressor(c) == nil {
		return nil, fmt.Errorf("client: destination %q: compressor %q is not registered (codec.RegisterCompressors)", cfg.Name, c)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		md   metadata.MD
		conn *grpc.ClientConn
		hs   *httpSender
		err  error
	)
	if cfg.Protocol == ProtocolHTTP {
		if hs, err = newHTTPSender(cfg); err != nil {
			return nil, err
		}
	} else if !cfg.h2() {
		if md, err = outgoingMD(cfg); err != nil {
			return nil, err
		}
		opts, err := dialOptions(cfg, newFrameCodec())
		if err != nil {
			return nil, err
		}
		if conn, err = grpc.NewClient(cfg.Endpoint, opts...); err != nil {
			return nil, fmt.Errorf("client: destination %q: %w", cfg.Name, err)
		}
	}
	d := &Dest{
		http:      hs,
		cfg:       cfg,
		log:       log.With("destination", cfg.Name),
		m:         newDestMetrics(cfg.Name, backend),
		conn:      conn,
		stop:      make(chan struct{}),
		sweepWake: make(chan struct{}, 1),
		drained:   make(chan struct{}),
	}
	// Only streams wait for acknowledgements; a unary destination's table stays empty and
	// costs nothing (a thousand idle destinations would otherwise hold 36 MB of slots).
	d.acks = &ackTable{}
	if cfg.Mode == ModeStream {
		d.acks = newAckTable(ackShardBits)
	}
	if backend != "" {
		d.log = d.log.With("backend", backend)
	}
	var headers []string
	for _, vs := range md {
		headers = append(headers, vs...)
	}
	if hs != nil {
		for _, h := range hs.headers {
			headers = append(headers, h[1])
		}
	}
	d.secrets = secretsOf(cfg, headers)
	d.backend = backend
	d.queueBytes.Store(cfg.QueueBytes)
	d.m.queueBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "otlpgate_client_queue_bytes"},
		func() float64 { return float64(d.held.Load()) })
	d.m.inFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "otlpgate_client_in_flight_requests"},
		func() float64 { return float64(d.sending.Load()) })
	heldBytes.add(d)
	d.streams.set = map[*stream]struct{}{}
	// The list grows past this only at a new peak of streams alive at once, when streams are
	// being made anyway; its bound can be a million (MaxInFlight).
	d.streams.free = make([]*stream, 0, min(d.maxFreeStreams(), 8*cfg.Streams*int(fastpath.NumSignals)))
	d.recvq = make(chan *stream)
	limit := cfg.MaxInFlight
	if limit == 0 {
		limit = cfg.Streams * cfg.Window
	}
	for i := range d.inFlight {
		d.inFlight[i] = make(chan struct{}, limit)
	}
	ctx := context.Background()
	if len(md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	d.ctx, d.cancel = context.WithCancel(ctx)
	d.streamOpts = []grpc.CallOption{grpc.WaitForReady(true)}
	if c := cfg.compressor(); c != "" {
		d.streamOpts = append(d.streamOpts, grpc.UseCompressor(c))
		d.unaryOpts = append(d.unaryOpts, grpc.UseCompressor(c))
	}
	switch {
	case cfg.Protocol == ProtocolV1:
		d.methods = [fastpath.NumSignals]string{coltracev1.TraceService_Export_FullMethodName,
			colmetricsv1.MetricsService_Export_FullMethodName, collogsv1.LogsService_Export_FullMethodName}
	case cfg.stream():
		d.methods = [fastpath.NumSignals]string{otepv1.StreamExporter_ExportTraces_FullMethodName,
			otepv1.StreamExporter_ExportMetrics_FullMethodName, otepv1.StreamExporter_ExportLogs_FullMethodName}
	default:
		d.methods = [fastpath.NumSignals]string{otepv1.UnaryExporter_ExportTraces_FullMethodName,
			otepv1.UnaryExporter_ExportMetrics_FullMethodName, otepv1.UnaryExporter_ExportLogs_FullMethodName}
	}
	if cfg.h2() {
		if d.h2, err = newH2Transport(&d.cfg, d.methods); err != nil {
			return nil, err
		}
		d.secrets = secretsOf(cfg, d.h2.secrets())
	}
	senders := cfg.Concurrency
	if cfg.stream() {
		senders = cfg.Streams
	}
	d.q.init(senders)
	return d, nil
}

// Name implements pipeline.Destination. Safe for concurrent use.
func (d *Dest) Name() string { return d.cfg.Name }

// Signals implements pipeline.SignalSelector: what signals= says. Safe for concurrent use.
func (d *Dest) Signals() fastpath.SignalSet { return d.cfg.Signals }

// Config returns the configuration the destination runs with, QueueBytes as SetQueueBytes
// last set it. Safe for concurrent use.
func (d *Dest) Config() Config {
	c := d.cfg
	c.QueueBytes = d.queueBytes.Load()
	return c
}

// SetQueueBytes makes n (positive) the bound on the bytes the destination holds, from the next
// Enqueue on. A reload that changes only this bound applies it in place: replacing the
// destination would re-send what it has in flight. Lowered below what it holds, it refuses
// batches until enough were finished; nothing it holds is dropped. Safe for concurrent use.
func (d *Dest) SetQueueBytes(n int64) {
	if n > 0 {
		d.queueBytes.Store(n)
	}
}

// Start starts the senders. It does not dial: the first send does, and an unreachable
// upstream only delays delivery (batches queue up to QueueBytes). Call it once, before
// Shutdown; safe for concurrent use.
func (d *Dest) Start() {
	if _, ok := d.state.move(stateRunning, stateCreated); !ok {
		return // started already, or Shutdown began first
	}
	d.log.Info("destination starting", "endpoint", d.cfg.Endpoint, "protocol", d.cfg.Protocol,
		"mode", d.cfg.Mode, "streams", d.cfg.Streams, "window", d.cfg.Window,
		"concurrency", d.cfg.Concurrency, "compression", d.cfg.compressor(), "tls", !d.cfg.TLS.Insecure)
	if d.cfg.stream() {
		d.prefill()
		for sig := range fastpath.Signal(fastpath.NumSignals) {
			for range d.cfg.Streams {
				l := &lane{d: d, sig: sig, timer: stoppedTimer()}
				d.wg.Add(1)
				go l.run()
			}
		}
		d.wg.Add(1)
		go d.sweep()
		return
	}
	for sig := range fastpath.Signal(fastpath.NumSignals) {
		for range d.cfg.Concurrency {
			d.wg.Add(1)
			if d.http != nil {
				go newHTTPWorker(d, sig).run()
				continue
			}
			if d.h2 != nil {
				go newH2Worker(d, sig).run()
				continue
			}
			go newWorker(d, sig).run()
		}
	}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// Enqueue implements pipeline.Destination: it takes the batch into the destination's queue, or
// refuses it with pipeline.ErrFull when the bytes the destination holds would exceed
// QueueBytes, and with pipeline.ErrClosed once Shutdown began. It never blocks on the network.
// The bound is shared by the signals on purpose: a single destination gets the pipeline's whole
// budget, so that a full queue shows as backpressure at admission, never as a refusal (a loss)
// here; a share per signal would turn the one into the other. Safe for concurrent use.
func (d *Dest) Enqueue(b *pipeline.Batch) error { return d.enqueue(b, false) }

// enqueue takes b into the queue of its signal: with the fresh batches, or, with first, with
// the re-sends, ahead of every fresh batch (enqueueFirst).
func (d *Dest) enqueue(b *pipeline.Batch, first bool) error {
	sig := b.Signal
	if sig >= fastpath.NumSignals {
		return errBadSignal
	}
	d.q.mu.Lock()
	if d.closing() { // read under q.mu: Shutdown takes that step under it
		d.q.mu.Unlock()
		return pipeline.ErrClosed
	}
	n := int64(b.Len())
	if !d.roomFor(n) {
		d.q.mu.Unlock()
		return pipeline.ErrFull
	}
	d.held.Add(n)
	d.outstanding.Add(1)
	r := getRequest(b, d.nextID.Add(1))
	if first {
		d.q.pushReadyLocked(r)
	} else {
		d.q.pushFreshLocked(r)
	}
	d.q.mu.Unlock()
	d.q.notify(sig)
	return nil
}

var errBadSignal = errors.New("client: batch of an unknown signal")

// roomFor reports whether a batch of n bytes fits in the queue bound (QueueBytes, or what
// SetQueueBytes set). A batch larger than the whole
// bound is taken when the destination holds nothing: refused, it could never be taken, and a
// feeder replaying the spool would wait behind it forever. Called with q.mu held.
func (d *Dest) roomFor(n int64) bool {
	held := d.held.Load()
	return held+n <= d.queueBytes.Load() || held == 0
}

// next blocks until a request of sig may be sent (the destination is not paused and one is
// queued or due) and returns it, or returns nil once the destination stops. t is the caller's
// own timer. Called by the senders of sig only.
func (d *Dest) next(sig fastpath.Signal, t *time.Timer) *request {
	r, _ := d.nextUntil(sig, t, 0)
	return r
}

// nextUntil is next that gives up waiting at until (nanotime; 0: never), reporting idle.
func (d *Dest) nextUntil(sig fastpath.Signal, t *time.Timer, until int64) (r *request, idle bool) {
	for {
		select {
		case <-d.stop:
			return nil, false
		default:
		}
		if !d.waitPause(t) {
			return nil, false
		}
		now := nanotime()
		d.q.mu.Lock()
		var wait time.Duration
		r, wait = d.q.popLocked(sig, now)
		d.q.mu.Unlock()
		if r != nil && d.expired(r, 0) {
			d.drop(r, DropRetryExhausted) // waited its whole budget in the queue
			continue
		}
		if r != nil {
			return r, false
		}
		if until > 0 {
			left := time.Duration(until - now)
			if left <= 0 {
				return nil, true
			}
			if wait < 0 || wait > left {
				wait = left
			}
		}
		if wait < 0 {
			select {
			case <-d.q.wake[sig]:
			case <-d.stop:
				return nil, false
			}
			continue
		}
		if !d.sleep(t, wait, d.q.wake[sig]) {
			return nil, false
		}
	}
}

// waitPause waits on t while the destination is paused by a throttle. It reports false when
// the destination stops meanwhile.
func (d *Dest) waitPause(t *time.Timer) bool {
	for {
		p := d.pausedUntil.Load()
		now := nanotime()
		if p <= now {
			return true
		}
		if !d.sleep(t, time.Duration(p-now), nil) {
			return false
		}
	}
}

// sleep waits for dur on t, or less when wake (if not nil) is notified. It reports false when
// the destination stops meanwhile.
func (d *Dest) sleep(t *time.Timer, dur time.Duration, wake chan struct{}) bool {
	t.Reset(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-d.stop:
		return false
	}
}

// deliver finishes r as acknowledged by the upstream.
func (d *Dest) deliver(r *request) {
	// The upstream answers again: what waits out an outage's backoff goes now.
	if d.outageDelayed.Load() && d.outageDelayed.CompareAndSwap(true, false) {
		d.q.releaseOutage(nanotime())
	}
	if d.backoffWaiting.Load() {
		d.answeredAfterOutage()
	}
	d.m.ackedRequests.Inc()
	d.m.ackedItem.Add(float64(r.items))
	d.acked.Add(1)
	if d.throttled.Load() != 0 {
		d.throttled.Store(0)
	}
	if t := d.cfg.Tally; t != nil {
		t.delivered.Add(int64(r.items))
	}
	if d.unserved.Load() != 0 {
		d.served(r.sig)
	}
	d.finish(r, true, false)
}

// drop finishes r as given up on, counted by reason. What the destination gives up because it
// stops and the batch's owner keeps (the spool's records, read again by the destination's
// replacement or by the next start) is not dropped: it is counted as returned instead.
func (d *Dest) drop(r *request, reason DropReason) {
	if reason.AtShutdown() && r.b.Kept() {
		d.returned.requests.Add(1)
		d.returned.items.Add(int64(r.items))
		d.m.returnedRequests.Inc()
		d.m.returnedItems.Add(float64(r.items))
		if t := d.cfg.Tally; t != nil {
			t.returned.Add(int64(r.items))
		}
		d.finish(r, false, false)
		return
	}
	if reason.AtShutdown() {
		l := &d.shutdownLost[reason-DropShutdownQueued]
		l.requests.Add(1)
		l.items.Add(int64(r.items))
	}
	switch reason {
	case DropTooLarge:
		d.noteError(errTooLarge)
	case DropInvalid:
		d.noteError(errInvalidPayload)
	}
	d.m.dropped[reason].Inc()
	d.m.droppedItems[reason].Add(float64(r.items))
	if t := d.cfg.Tally; t != nil {
		t.dropped[reason].Add(int64(r.items))
	}
	// A refusal is the upstream's doing: a spooled batch's records are counted as rejected.
	d.finish(r, false, reason == DropRejected)
}

// lose drops a request a sender held when the destination stopped.
func (d *Dest) lose(r *request) {
	if take := d.handback.Load(); take != nil {
		d.handBack(r, *take) // Handover: another backend gets it
		return
	}
	if r.attempt == 0 {
		d.drop(r, DropShutdownQueued)
		return
	}
	d.drop(r, DropShutdownRetry)
}

// finish finishes r's batch: delivered, refused by the upstream for good (rejected), or given
// up on.
func (d *Dest) finish(r *request, delivered, rejected bool) {
	b, n := r.b, r.size
	putRequest(r)
	d.held.Add(-int64(n))
	if rejected {
		b.Reject()
	} else {
		b.Done(delivered)
	}
	if d.outstanding.Add(-1) == 0 && d.closing() {
		d.drainOnce.Do(d.closeDrained)
	}
}

func (d *Dest) closeDrained() { close(d.drained) }

// shutdownLoss describes what Shutdown gave up on, by reason, or returns nil when nothing was.
// What was sent and not answered (shutdown_pending) is told apart from what never reached the
// upstream, or was refused or unanswered and waited to be sent again: the upstream may have
// taken the former, the latter it does not have.
func (d *Dest) shutdownLoss() error {
	var lost, unanswered struct{ requests, items int64 }
	var parts []string
	for i := range d.shutdownLost {
		l := &d.shutdownLost[i]
		r, n := l.requests.Load(), l.items.Load()
		if r == 0 {
			continue
		}
		reason := DropShutdownQueued + DropReason(i)
		if reason.Unanswered() {
			unanswered.requests, unanswered.items = r, n
		} else {
			lost.requests, lost.items = lost.requests+r, lost.items+n
		}
		parts = append(parts, fmt.Sprintf("%s: %d requests, %d items", reason, r, n))
	}
	var what []string
	if lost.requests > 0 {
		what = append(what, fmt.Sprintf("%d items (%d requests) not delivered", lost.items, lost.requests))
	}
	if unanswered.requests > 0 {
		what = append(what, fmt.Sprintf("%d items (%d requests) sent without an answer, perhaps delivered", unanswered.items, unanswered.requests))
	}
	if len(what) == 0 {
		return nil
	}
	return fmt.Errorf("client: destination %q: at the shutdown deadline %s (%s; otlpgate_client_dropped_items_total)",
		d.cfg.Name, strings.Join(what, ", and "), strings.Join(parts, "; "))
}

// result acts on an OTEP answer: its result code, and the retry_delay_ms of a FailedRetryable
// one, a wait the server asks for this request alone (its tenant is over its rate, say): the
// request waits at least that long, and the destination's other requests are not held up.
func (d *Dest) result(r *request, code otepv1.ResultCode, delayMs uint64) {
	switch code {
	case otepv1.ResultCode_Success:
		d.deliver(r)
	case otepv1.ResultCode_FailedNoneRetryable:
		d.noteError(errRejectedResult)
		d.reject(r, errRejectedResult)
	default: // FailedRetryable, and codes this build does not know
		d.noteError(errRetryableResult)
		d.retryAfter(r, RetryFailed, time.Duration(min(delayMs, maxAnswerDelayMs))*time.Millisecond)
	}
}

// maxAnswerDelayMs caps the wait an answer may ask for (an hour): RetryMaxElapsed still bounds
// the whole, and a larger value is no reason to hold a request longer.
const maxAnswerDelayMs = uint64(time.Hour / time.Millisecond)

// expired reports whether r would be sent later than RetryMaxElapsed after the destination took
// it. The budget runs from then, not from the first send: a request that never leaves because
// the upstream cannot be reached must give up too, or a dead destination would hold its batches
// (and their share of the pipeline's bytes) for ever.
func (d *Dest) expired(r *request, delay time.Duration) bool {
	return d.cfg.RetryMaxElapsed > 0 && nanotime()+int64(delay)-r.taken > int64(d.cfg.RetryMaxElapsed)
}

// retry sends r again after the backoff of its attempt, unless that is past RetryMaxElapsed.
func (d *Dest) retry(r *request, why RetryReason) { d.retryAfter(r, why, 0) }

// retryOutage is retry for a request that failed to reach the upstream (it could not be
// connected, or reset the connection): the upstream's next success sends it at once instead
// of after its backoff, once per request.
func (d *Dest) retryOutage(r *request) {
	mark := !r.released
	d.retryMarked(r, RetryFailed, 0, mark) // r is the queue's from here
	if mark {
		d.outageDelayed.Store(true)
	}
}

// retryAfter is retry that waits at least atLeast.
func (d *Dest) retryAfter(r *request, why RetryReason, atLeast time.Duration) {
	d.retryMarked(r, why, atLeast, false)
}

// retryMarked is retryAfter, r marked as waiting out an outage (retryOutage) or not.
func (d *Dest) retryMarked(r *request, why RetryReason, atLeast time.Duration, outage bool) {
	delay := max(d.cfg.backoff(r.attempt), atLeast)
	if d.expired(r, delay) {
		d.drop(r, DropRetryExhausted)
		return
	}
	d.m.retried[why].Inc()
	r.due = nanotime() + int64(delay)
	r.outage = outage
	d.q.pushDelayed(r)
}

// retryAfterPause sends r again once the destination's throttle pause is over.
func (d *Dest) retryAfterPause(r *request) {
	if d.expired(r, time.Duration(d.pausedUntil.Load()-nanotime())) {
		d.drop(r, DropRetryExhausted)
		return
	}
	d.m.retried[RetryThrottled].Inc()
	d.q.pushReady(r)
}

// resend sends r again at once: the stream it was pending on ended without answering it.
func (d *Dest) resend(r *request) { d.sendAgain(r, DropStreamBroken) }

// unanswered acts on r, taken out of the ack table because its answer is later than
// AckTimeout. The request is sent again at once, as when its stream breaks: an upstream that
// takes a request and never answers must not turn an acknowledged batch into a loss (with a
// spool, the batch's records stay on disk until delivered), and the sweeper ends the stream
// when nothing at all came back on it. The upstream may have the request: a possible duplicate.
func (d *Dest) unanswered(r *request) {
	d.m.ackTimeouts.Inc()
	d.noteError(errAckTimeout)
	d.sendAgain(r, DropAckTimeout)
}

// sendAgain queues r to be sent again at once, or drops it, counted under noRetry, when the
// destination does not re-send (retry-on-reconnect=false), or under retry_exhausted when its
// retry budget is spent.
func (d *Dest) sendAgain(r *request, noRetry DropReason) {
	switch {
	case !d.cfg.RetryOnReconnect:
		d.drop(r, noRetry)
	case d.expired(r, 0):
		d.drop(r, DropRetryExhausted)
	default:
		d.m.resent.Inc()
		d.q.pushReady(r)
	}
}

// throttle pauses every sender of the destination for at least delay (the server's
// RetryInfo), longer when throttles follow each other without a success in between.
func (d *Dest) throttle(delay time.Duration) {
	n := d.throttled.Add(1)
	pause := d.cfg.throttlePause(delay, n)
	until := nanotime() + int64(pause)
	for {
		cur := d.pausedUntil.Load()
		if cur >= until || d.pausedUntil.CompareAndSwap(cur, until) {
			break
		}
	}
	d.m.throttles.Inc()
	d.log.Warn("upstream asked to pause", "retry_delay", delay, "pause", pause, "in_a_row", n)
}

// Shutdown stops accepting batches (Enqueue returns pipeline.ErrClosed), waits while ctx
// allows for every held request to be acknowledged (WaitOnShutdown), then stops every
// goroutine and closes the connection. What was not delivered is finished with Done(false) and
// counted in otlpgate_client_dropped_requests_total with reason shutdown_queued (never sent),
// shutdown_pending (sent, not answered) or shutdown_retry (waiting to be sent again); the
// error says how much. A batch whose owner keeps it (pipeline.Batch.Kept: the spool's, once
// its feeder stopped) is not lost: it is counted in otlpgate_client_returned_to_spool_items_total
// instead, and is no error. Call it once; safe for concurrent use with everything else.
func (d *Dest) Shutdown(ctx context.Context) error {
	d.q.mu.Lock()
	prev, ok := d.state.move(stateDraining, stateCreated, stateRunning)
	d.q.mu.Unlock()
	if !ok {
		return errors.New("client: Shutdown called twice")
	}
	if d.outstanding.Load() == 0 {
		d.drainOnce.Do(d.closeDrained)
	}
	if d.cfg.WaitOnShutdown && prev == stateRunning {
		select {
		case <-d.drained:
		case <-ctx.Done():
		}
	}
	d.state.move(stateStopping, stateDraining)
	close(d.stop)
	d.cancel()
	if d.http != nil {
		d.http.abort() // fasthttp calls take no context: break their connections instead
	}
	if d.h2 != nil {
		d.h2.abort() // workers waiting for a stream slot or window wake up and fail
	}
	d.wg.Wait()
	if d.conn != nil {
		d.conn.Close()
	}
	defer heldBytes.remove(d) // after the drops below have settled d.held

	// Every goroutine is gone: what is left is in the ack table or the queue.
	for _, r := range d.acks.takeIf(func(*request) bool { return true }, nil) {
		d.sending.Add(-1)
		d.drop(r, DropShutdownPending)
	}
	d.q.mu.Lock()
	left, fresh := d.q.takeAllLocked(nil, nil)
	d.q.mu.Unlock()
	for _, r := range left {
		d.drop(r, DropShutdownRetry)
	}
	for _, r := range fresh {
		d.drop(r, DropShutdownQueued)
	}
	d.state.move(stateStopped, stateStopping)
	// The caller reports the loss, once: no log line here.
	if err := d.shutdownLoss(); err != nil {
		return err
	}
	if n := d.returned.requests.Load(); n > 0 {
		d.log.Info("destination stopped: what it did not deliver stays in the spool, for its replacement or the next start",
			"requests", n, "items", d.returned.items.Load())
		return nil
	}
	d.log.Info("destination stopped")
	return nil
}

// PassThrough is the encoding a pass-through batch must be in for the destination to send its
// bytes as they are (pipeline.WireEncoder): its compression, gzip or zstd, when the request
// body is the batch itself, as in OTLP/HTTP and the v1 Export call. An OTEP request wraps the
// batch in a message of its own, which the compressor must compress whole. Safe for concurrent
// use.
func (d *Dest) PassThrough() pipeline.Encoding {
	if d.cfg.Protocol != ProtocolHTTP && d.cfg.Protocol != ProtocolV1 {
		return pipeline.EncodingNone
	}
	switch d.cfg.compressor() {
	case codec.Gzip:
		return pipeline.EncodingGzip
	case codec.Zstd:
		return pipeline.EncodingZstd
	}
	return pipeline.EncodingNone
}

// sendsAsIs reports whether d can send b: a plain batch, or a pass-through batch in the
// encoding d sends. The pipeline hands a pass-through batch only to destinations whose
// PassThrough matches; this guards that invariant, since a batch sent with the wrong encoding
// would reach the upstream compressed twice, or not decompressed at all.
func (d *Dest) sendsAsIs(b *pipeline.Batch) bool {
	return b.Encoding == pipeline.EncodingNone || b.Encoding == d.PassThrough()
}
