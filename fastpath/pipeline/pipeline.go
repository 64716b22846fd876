package pipeline

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
)

// Pipeline admits requests, batches them per signal and fans sealed batches out to every
// destination.
//
// Admission is byte-bounded: a request's bytes count against Config.QueueMaxBytes from the moment
// it is admitted until every destination called Done on the batch that holds it. Memory is
// therefore bounded by the budget plus one open batch buffer per signal, whatever the
// destinations do; a destination that cannot keep up drops for itself (its own queue limit) and
// never stalls the others.
type Pipeline struct {
	cfg  Config
	rule Seal // cfg's batch bounds, shared with the spool's feeders
	// dests is the destination set a new batch takes (destset.go); setMu serializes its swaps.
	dests atomic.Pointer[destSet]
	setMu sync.Mutex
	m     *pipelineMetrics

	queued  atomic.Int64 // admitted bytes not yet finished by every destination
	sealedN atomic.Int64 // sealed batches not yet finished by every destination (Eager)
	// sizeHint is the size of the signal's last sealed batch: new batches start with about that
	// much room rather than BatchMaxBytes, so that many small queued batches do not each pin a
	// buffer of the maximum size.
	sizeHint [fastpath.NumSignals]atomic.Int64
	drained  atomic.Int64 // bytes finished so far, for the drain rate
	rate     atomic.Int64 // drained bytes per second, smoothed by the flusher

	// lastSeal is when the signal's last batch was sealed (unix nanoseconds), for BatchMinGap.
	lastSeal [fastpath.NumSignals]atomic.Int64
	// kicks counts requests for a pass of kick (Eager) not yet served. The goroutine that
	// raises it from zero runs passes until it is back at zero; any other caller, a batch
	// finished synchronously inside the running pass's Enqueue included, only raises it. That
	// keeps kick from recursing through seal, and no request is lost: the runner sees the
	// count it did not take and makes one more pass.
	kicks atomic.Int64
	// sealers counts kick passes and gap timers at work. Each raises it before it looks at
	// closed; Close sets closed and then waits for it to reach zero. Both run on goroutines
	// Close does not own (a destination's, a timer's): without the wait a batch taken before
	// Close could be handed to the destinations after Close returned, when they are already
	// shutting down. A counter rather than a lock: a gap timer's seal may finish a batch inside
	// Enqueue and so start a kick on the same goroutine.
	sealers atomic.Int32
	// handing counts batches taken out of an open set to be sealed (takeOpenLocked, sealOpen)
	// and not yet handed to every destination: they are taken under the signal's lock and
	// handed out after it, so Flush, which finds nothing open, waits for them too.
	handing atomic.Int32

	sig [fastpath.NumSignals]struct {
		// gap seals the open batch once BatchMinGap has passed since the last seal; made once,
		// re-armed with Reset, so that holding a batch back allocates nothing.
		gap *time.Timer
		// age seals the signal's open batches at BatchMaxAge: set for the oldest open batch
		// when one stays open, stopped when none is left open, so that a batch sealed before
		// its age (by a request, the gap, a kick, a limit) costs no wake-up at all. Made
		// once, re-armed with Reset, like gap.
		age *time.Timer
		mu  struct {
			sync.Mutex
			open   openSet // one batch per tenant (openset.go)
			closed bool    // set by Close: nothing may open a batch after the final flush
			armed  bool    // gap is set to fire
			aging  bool    // age is set to fire
		}
	}

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
	// asleep is set while the flusher waits on wake instead of ticking: nothing is open or in
	// flight, and no tenant can go idle (settledFlusher). The goroutine that opens the next
	// batch to stay open clears it and wakes the flusher (wakeFlusher), so an idle gateway
	// spends no CPU on a timer that has nothing to do, nor does a request whose batch is
	// sealed as it is admitted (Eager, the destinations idle).
	asleep atomic.Bool
	wake   chan struct{} // capacity 1
}

// New returns a running pipeline feeding dests. Close stops it.
func New(cfg Config, dests []Destination) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(dests) == 0 {
		return nil, errors.New("fastpath: no destination")
	}
	var routes *tenant.Routes
	if ts := cfg.Tenants; ts != nil {
		routes = ts.Routes()
	}
	if ts := cfg.Tenants; ts != nil && len(ts.Config().Routes) != 0 && len(ts.Config().Routes) != len(dests) {
		return nil, fmt.Errorf("fastpath: %d tenant routes for %d destinations", len(ts.Config().Routes), len(dests))
	}
	if r := cfg.Router; r != nil && bits.Len64(r.All()) != len(dests) {
		return nil, fmt.Errorf("fastpath: resource routes for %d destinations, %d given", bits.Len64(r.All()), len(dests))
	}
	p := &Pipeline{cfg: cfg, rule: cfg.Seal(), m: newPipelineMetrics(), stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	if p.cfg.Served == nil {
		p.cfg.Served = new(Served)
	}
	p.cfg.Served.Set(dests)
	p.cfg.Routing = &Routing{}
	res := newRouteSet(cfg.Router, routes, dests)
	p.cfg.Routing.cur.Store(res)
	p.dests.Store(newDestSet(dests, routes, res))
	for i := range p.sig {
		sig := fastpath.Signal(i)
		p.sig[i].gap = time.AfterFunc(time.Hour, func() { p.sealGap(sig) })
		p.sig[i].gap.Stop()
		p.sig[i].age = time.AfterFunc(time.Hour, func() { p.sealAged(sig) })
		p.sig[i].age.Stop()
	}
	livePipelines.add(p)
	p.wg.Add(1)
	go p.flusher()
	return p, nil
}

// Config returns the configuration the pipeline runs with.
func (p *Pipeline) Config() Config { return p.cfg }

// Ack returns the acknowledgement mode (Config.Ack). It implements Admitter. Safe for
// concurrent use.
func (p *Pipeline) Ack() AckMode { return p.cfg.Ack }

// Consume admits req.Body as a v1 request body from req.Origin, charging what its processing
// writes to ConsumeBudget. It implements Consumer. Safe for concurrent use.
func (p *Pipeline) Consume(req Request) error {
	_, err := p.admit(p.cfg.ConsumeBudget, &Request{Signal: req.Signal, Origin: req.Origin, Body: req.Body, Items: req.Items}, false)
	return err
}

// AdmitDelivered admits req.Body as Consume does, charging ConsumeBudget, but returns the batch
// holding it whatever Config.Ack says, with a reference for the caller, who waits for its end
// (Batch.Wait, Batch.Outcome) and then calls Unref: the intake that acknowledges its source
// only once every destination delivered (the Kafka consumer, which commits an offset then)
// learns it even when the others are answered at acceptance. nil with no error: the processing
// steps left nothing to deliver. Routes by resource (Config.Router) split a request between
// batches, which no single batch can answer for: such a request is refused with
// ErrRoutesUnwaited. Safe for concurrent use.
func (p *Pipeline) AdmitDelivered(req Request) (*Batch, error) {
	if p.dests.Load().res != nil {
		return nil, ErrRoutesUnwaited
	}
	return p.admit(p.cfg.ConsumeBudget, &Request{Signal: req.Signal, Origin: req.Origin, Body: req.Body, Items: req.Items}, true)
}

// ErrRoutesUnwaited is AdmitDelivered's refusal of a request while destinations route by
// resource (-dest match=): its entries would go in several batches.
var ErrRoutesUnwaited = errors.New("fastpath: routes by resource split a request that waits for its delivery")

// Serves reports whether sig has a destination now, for the default tenant. It implements
// Serving. Safe for concurrent use.
func (p *Pipeline) Serves(sig fastpath.Signal) bool { return Serves(&p.cfg, nil, sig) }

// Admit admits req into the open batch of its signal, tenant (and route, and encoding). A
// request that arrived compressed (req.Wire) joins a pass-through batch as it arrived when it
// can (passthrough.go); one in a buffer the caller offers (req.Own) may become a fresh
// batch's buffer (adopt.go). With AckUpstream it returns the batch holding the request, with
// a reference for the caller, who waits on it and then calls Unref; with AckAccept it returns
// nil. It implements Admitter. Safe for concurrent use.
func (p *Pipeline) Admit(req Request) (*Batch, error) {
	return p.admit(p.cfg.Budget, &req, p.cfg.Ack == AckUpstream)
}

// admit prepares req (Prepare) and enqueues it the way its plan says: compressed as it
// arrived, split by route, or whole, charging what its processing writes to budget (the
// intake limiter's budget of the intake it came from). req.Own, when not nil, is the caller's
// pooled buffer that holds exactly req.Body: a fresh batch may take it over instead of
// copying the request.
func (p *Pipeline) admit(budget Budget, req *Request, wait bool) (*Batch, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	for {
		b, err := p.prepareEnqueue(budget, req, wait)
		if err != errRoutesChanged {
			return b, err
		}
		// The destinations and their router changed since the request was split: it is split
		// again by the router of the set in force, so that every entry goes by one set.
	}
}

// prepareEnqueue is one attempt of admit.
func (p *Pipeline) prepareEnqueue(budget Budget, req *Request, wait bool) (*Batch, error) {
	r, err := Prepare(&p.cfg, budget, &p.dests.Load().Encodings, req)
	if err != nil || r.Dropped() {
		return nil, err
	}
	defer r.Release()
	switch {
	case r.Encoding != EncodingNone:
		b, err := p.enqueueWire(&r, wait)
		if err == errSetChanged {
			// The destinations changed, since Prepare looked, to a set that does not send the
			// request's encoding as it is: a batch of it must never reach a destination that
			// would compress it again, so it goes the plain way.
			plain := Request{Signal: req.Signal, Origin: req.Origin, Body: req.Body, Items: req.Items}
			if b, err = p.admit(budget, &plain, wait); err == nil {
				countFallback(FallbackDestinations, len(plain.Body))
			}
		}
		return b, err
	case r.route != nil:
		return nil, p.enqueueRoutes(&r) // Validate refuses Router with AckUpstream
	}
	if req.Own != nil && r.out.buf == nil {
		// Not processed: r.Req is still the caller's bytes. (A processed body is in a
		// buffer Prepared returns to the pool on Release.)
		r.own = req.Own
	}
	return p.enqueue(&r, wait)
}

// charge adds n bytes to the queue if they fit within Config.QueueMaxBytes. A refused charge
// never shows: adding first and taking back on refusal would let the gauge, /readyz and the
// status page read the queue above its bound while requests are refused.
func (p *Pipeline) charge(n int64) bool {
	for {
		q := p.queued.Load()
		if q+n > p.cfg.QueueMaxBytes {
			return false
		}
		if p.queued.CompareAndSwap(q, q+n) {
			return true
		}
	}
}

// enqueue appends a prepared request to the open batch of its signal and tenant, within the
// queue's budget.
func (p *Pipeline) enqueue(r *Prepared, wait bool) (*Batch, error) {
	sig, req, layout, t := r.Sig, r.Req, r.Layout, r.Tenant
	n := int64(len(req))
	if !p.charge(n) {
		r.Refused(RefusedQueueFull)
		return nil, ErrFull
	}

	s := &p.sig[sig]
	var sealed *Batch
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		p.queued.Add(-n)
		return nil, ErrClosed
	}
	b := s.mu.open.get(t)
	// A batch opened before SetDestinations goes to the previous set: the request, admitted
	// now, goes to the current one, in a batch of its own.
	set := p.dests.Load()
	if set.res != r.rs {
		// Prepared without a router, for a set that has one now: split it by the set's.
		s.mu.Unlock()
		p.queued.Add(-n)
		return nil, errRoutesChanged
	}
	if b != nil && (b.set != set || !p.rule.Fits(b.Payload.Len()+len(req), b.Items)) {
		sealed, b = b, nil
		p.takeOpenLocked(sig, sealed)
	}
	fresh, adopted := b == nil, false
	if fresh {
		size := p.initialSize(sig, t, len(req))
		if adopted = r.adoptable(size); adopted {
			size = adoptSize
		}
		b = getBatch(p, sig, size)
		b.Tenant = t
		b.born = time.Now().UnixNano()
		b.set = set
		set.users.Add(1)
		s.mu.open.put(b)
	}
	buf := b.Payload.Buf()
	before := len(*buf)
	// Only the resource entries join the batch: see AppendEntries.
	var st fastpath.Stripped
	var err error
	if adopted {
		// The request is its own v1 form and opens the batch: its buffer becomes the
		// batch's (adopt.go), no copy.
		adopt(b, r.own)
	} else {
		if room := cap(*buf) - len(*buf); room < len(req) {
			grow(buf, len(*buf)+len(req), p.cfg.BatchMaxBytes)
		}
		*buf, _, st, err = fastpath.AppendEntries(*buf, req, layout)
	}
	if err != nil {
		*buf = (*buf)[:before]
		if fresh {
			// The batch was opened for this request, and nothing else holds it: an empty
			// batch must not be sealed.
			s.mu.open.remove(b)
			set.users.Add(-1)
			b.Payload.Release()
			b.unref()
		}
		s.mu.Unlock()
		p.queued.Add(-n)
		if sealed != nil {
			p.seal(sealed)
		}
		return nil, err
	}
	// The budget was charged for the request as received; the batch holds its v1 form.
	added := int64(len(*buf) - before)
	if added != n {
		p.queued.Add(added - n)
	}
	b.Items += r.Items
	if wait {
		b.waitedLocked()
	}
	full := p.fullLocked(sig, b, len(*buf))
	if fresh && full != b {
		p.openedLocked(sig, b)
	} else if fresh && p.sweepsTenants() {
		// A batch sealed by the request that opened it, as every batch is at low rates with
		// Eager, needs neither the age timer nor the flusher: a wake-up and a tick per request,
		// for nothing to do, were two of the fixed costs that made a request at 50 a second
		// cost ten times one at saturation. Idle tenants still need the flusher.
		p.wakeFlusher()
	}
	s.mu.Unlock()

	r.Admitted(st)
	return p.sealTaken(sealed, full, b, wait)
}

// sealTaken is the tail of every enqueue: it seals what the request took out of the open set
// (the batch it could not join, the one it filled) once the set's lock is released, and hands
// b to a caller that waits on its delivery.
func (p *Pipeline) sealTaken(sealed, full, b *Batch, wait bool) (*Batch, error) {
	if sealed != nil {
		p.seal(sealed)
	}
	if full != nil {
		p.seal(full)
	}
	if wait {
		return b, nil
	}
	return nil, nil
}

// fullLocked takes b, an open batch of size (uncompressed) bytes, out of the open set and
// returns it when it is to be sealed now: at BatchMaxItems or BatchMaxBytes, or, eager, when no
// batch is with the destinations and the gap since the last seal has passed. nil: it stays
// open. Called with the signal's lock held.
func (p *Pipeline) fullLocked(sig fastpath.Signal, b *Batch, size int) *Batch {
	// A batch another goroutine is handing out counts as one out: sealed now, this one could
	// reach the destinations first, and a client's requests would arrive out of order.
	if p.rule.Full(size, b.Items) || (p.cfg.Eager && p.sealedN.Load() == 0 && p.handing.Load() == 0 && p.pastGapLocked(sig)) {
		p.takeOpenLocked(sig, b)
		return b
	}
	return nil
}

// pastGapLocked reports whether BatchMinGap has passed since sig's last seal; if not, it arms
// the signal's gap timer to seal the open batch when it has. Called with the signal's lock held.
func (p *Pipeline) pastGapLocked(sig fastpath.Signal) bool {
	gap := int64(p.cfg.BatchMinGap)
	if gap <= 0 {
		return true
	}
	s := &p.sig[sig]
	wait := p.lastSeal[sig].Load() + gap - time.Now().UnixNano()
	if wait <= 0 {
		return true
	}
	if !s.mu.armed {
		// The timer is the fallback for a quiet signal, set a quarter of a gap past the gap's
		// end: while requests keep coming at least that often, the first one after the gap
		// seals the batch on its own goroutine (disarming the timer), so a busy signal's
		// batches cost no timer wake-up of an idle runtime; a request followed by silence
		// waits at most 1.25 gaps.
		s.mu.armed = true
		s.gap.Reset(time.Duration(wait + gap/4))
	}
	return false
}

// disarmLocked stops sig's gap timer when the open batches are sealed some other way (a
// request, a kick, a limit, their age, Flush), so that the timer never seals the next batch
// early, and its age timer, which has nothing left to age. Called with the signal's lock held
// once no batch of sig is open.
func (p *Pipeline) disarmLocked(sig fastpath.Signal) {
	s := &p.sig[sig]
	if s.mu.armed {
		s.mu.armed = false
		s.gap.Stop()
	}
	if s.mu.aging {
		s.mu.aging = false
		s.age.Stop()
	}
}

// openedLocked runs when b, a batch of sig just put in the open set, stays open: the age
// timer is set for it unless it is set already (for an older batch, due first), and the
// flusher, which keeps the drain rate while bytes are queued, is woken if it sleeps. Called
// with the signal's lock held.
func (p *Pipeline) openedLocked(sig fastpath.Signal, b *Batch) {
	s := &p.sig[sig]
	if !s.mu.aging {
		s.mu.aging = true
		s.age.Reset(p.rule.Due(b.born, time.Now().UnixNano()))
	}
	p.wakeFlusher()
}

// sealAged seals sig's open batches that reached BatchMaxAge and sets the age timer again for
// the oldest batch left open (another tenant's, younger), if any. It runs on the timer's
// goroutine. The timer is set from the open set as it is at the end, not from a flag read at
// the start: a batch opened meanwhile may have set it for its own, later, age.
func (p *Pipeline) sealAged(sig fastpath.Signal) {
	p.sealers.Add(1)
	defer p.sealers.Add(-1)
	if p.closed.Load() {
		return // Close seals what is open
	}
	s := &p.sig[sig]
	s.mu.Lock()
	n := s.mu.open.len()
	s.mu.Unlock()
	if n > 0 {
		p.sealOpen(sig, n, time.Now().UnixNano()-int64(p.rule.MaxAge))
	}
	s.mu.Lock()
	if born, ok := s.mu.open.oldest(); ok && !s.mu.closed {
		s.mu.aging = true
		s.age.Reset(p.rule.Due(born, time.Now().UnixNano()))
	}
	s.mu.Unlock()
}

// takeOpenLocked takes b, an open batch of sig, out of the open set to be sealed; the gap
// timer stops once no batch of sig is left open for it. Called with the signal's lock held.
func (p *Pipeline) takeOpenLocked(sig fastpath.Signal, b *Batch) {
	s := &p.sig[sig]
	p.handing.Add(1)
	s.mu.open.remove(b)
	if s.mu.open.empty() {
		p.disarmLocked(sig)
	}
}

// sealGap seals sig's open batches once the gap after the last seal has passed, unless the
// destinations took a sealed batch in the meantime: the batches then keep filling until they
// finish it (kick) or reach a limit. It runs on the timer's goroutine.
func (p *Pipeline) sealGap(sig fastpath.Signal) {
	p.sealers.Add(1)
	defer p.sealers.Add(-1)
	if p.closed.Load() {
		return // Close seals what is open
	}
	s := &p.sig[sig]
	s.mu.Lock()
	s.mu.armed = false
	n := s.mu.open.len()
	if n == 0 || (p.cfg.Eager && p.sealedN.Load() != 0) {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	// One batch per tenant: each is taken under the lock and sealed without it. The count
	// bounds the loop while requests keep opening batches.
	p.sealOpen(sig, n, 1<<63-1)
}

// sealOpen seals up to n of sig's open batches born at or before cutoff, one at a time: a
// batch is taken under the signal's lock and sealed without it.
func (p *Pipeline) sealOpen(sig fastpath.Signal, n int, cutoff int64) {
	s := &p.sig[sig]
	for range n {
		s.mu.Lock()
		b := s.mu.open.takeBornBy(cutoff)
		if b == nil {
			s.mu.Unlock()
			return
		}
		p.handing.Add(1)
		if s.mu.open.empty() {
			p.disarmLocked(sig)
		}
		s.mu.Unlock()
		p.seal(b)
	}
}

// kick runs when the destinations have finished every sealed batch (Eager): each signal's open
// batches, which waited while a batch was out, leave now if the signal's gap has passed, else
// when its gap timer fires. Without it a waiting batch would leave only with the next request,
// the gap timer or BatchMaxAge, however long the destinations had been idle. It runs on
// whichever goroutine finished the last batch (a destination's, or inside Enqueue for one that
// finishes at once).
func (p *Pipeline) kick() {
	if p.kicks.Add(1) != 1 {
		return // a pass is running or about to start: it makes one more for this request
	}
	p.sealers.Add(1)
	defer p.sealers.Add(-1)
	for {
		if p.closed.Load() {
			// Close seals what is open. kicks stays raised: nothing may kick a closed pipeline.
			return
		}
		n := p.kicks.Load()
		for i := range p.sig {
			s := &p.sig[i]
			s.mu.Lock()
			open := s.mu.open.len()
			if open == 0 || !p.pastGapLocked(fastpath.Signal(i)) {
				s.mu.Unlock()
				continue
			}
			s.mu.Unlock()
			p.sealOpen(fastpath.Signal(i), open, 1<<63-1)
		}
		if p.kicks.Add(-n) == 0 {
			return
		}
	}
}

// initialSize is the capacity a new batch of sig for t starts with: the last sealed batch's
// size (the best guess of this one's), at least the first request and a few KiB, at most
// BatchMaxBytes unless the request alone is larger. A tenant other than the default starts
// with twice its first request or minTenantBatchCap at most: with many tenants open at once,
// each pinning a buffer the size of the signal's last batch would multiply the memory open
// batches hold (a thousand tenants, three signals, 1MiB each: 3GiB); a busy tenant's batch
// grows by doubling.
func (p *Pipeline) initialSize(sig fastpath.Signal, t *tenant.Tenant, first int) int {
	n := min(max(int(p.sizeHint[sig].Load()), minBatchCap), p.cfg.BatchMaxBytes)
	if !isDefault(t) {
		n = min(n, max(2*first, minTenantBatchCap))
	}
	return max(n, first)
}

// minTenantBatchCap is what a tenant's batch may start with before it is capped by its first
// request: a thousand tenants' open batches of three signals then pin at most 48MiB.
const minTenantBatchCap = 16 << 10

// minBatchCap is the smallest buffer a batch starts with.
const minBatchCap = 4 << 10

// grow replaces the buffer behind buf by a pooled one of at least need bytes (doubling, within
// limit when possible), copying its content and returning the old buffer to the pool: growing
// makes no garbage.
func grow(buf *[]byte, need, limit int) {
	n := max(need, min(2*cap(*buf), limit))
	nb := pool.GetBytes(n)
	*nb = append(*nb, *buf...)
	*buf, *nb = *nb, (*buf)[:0]
	pool.PutBytes(nb)
}

// seal hands b to every destination of its set that takes its tenant and route (all of them
// without tenants and routes). It runs without the signal's lock: destinations may finish the
// batch synchronously, inside Enqueue.
func (p *Pipeline) seal(b *Batch) {
	if p.cfg.BatchMinGap > 0 {
		p.lastSeal[b.Signal].Store(time.Now().UnixNano())
	}
	b.size = b.Payload.Len()
	if b.Encoding == EncodingNone { // a pass-through batch's size says nothing of a plain one's
		p.sizeHint[b.Signal].Store(int64(b.size))
	}
	p.sealedN.Add(1)
	p.m.sealed(b)
	countSealed(b)
	set := b.set
	n := 0
	for i := range set.dests {
		if b.takes(i) {
			n++
		}
	}
	b.refs.Add(1) // keep b alive through the loop even if every destination finishes at once
	if n == 0 {
		// Admission refuses a request no destination of its tenant takes (tenant.ErrNoRoute,
		// ErrUnserved); only a request admitted while SetDestinations replaced the set by one
		// without its signal lands here. It is given up as a refused hand-over is.
		unservedBatches.Inc()
		b.pending.Store(1)
		b.Done(false)
	} else {
		b.pending.Store(int32(n))
	}
	for i, d := range set.dests {
		if !b.takes(i) {
			continue
		}
		b.Payload.Retain()
		if err := d.Enqueue(b); err != nil {
			set.refused(i, err)
			b.Done(false)
		}
	}
	set.users.Add(-1) // handed out: SetDestinations may retire the set
	if p.handing.Add(-1) == 0 && p.cfg.Eager && p.sealedN.Load() == 0 && !p.closed.Load() {
		// The destinations finished everything while this batch was handed out (the kick of
		// the last Done ran then): a batch that stayed open because this one was being handed
		// out leaves now, not with the next request.
		p.kick()
	}
	b.Payload.Release() // the reference the batch was built with
	b.unref()
}

// batchEnded ends a batch of the pipeline: its bytes leave the queue's budget, and an
// AckUpstream waiter learns the outcome. It implements ender.
func (p *Pipeline) batchEnded(b *Batch, _, _ bool) {
	p.finished(b)
	if b.finished != nil {
		close(b.finished)
	}
	b.unref()
}

// finished settles the budget of a batch every destination is done with.
func (p *Pipeline) finished(b *Batch) {
	n := int64(b.size)
	idle := p.sealedN.Add(-1) == 0
	if p.queued.Add(-n) == 0 && p.closed.Load() {
		livePipelines.remove(p)
	}
	p.drained.Add(n)
	if b.failures.Load() > 0 {
		p.m.undelivered(b)
	}
	if idle && p.cfg.Eager && !p.closed.Load() {
		p.kick()
	}
}

// flusher keeps the drain rate current, once a second while bytes are queued, and sweeps
// idle tenants; each signal's age timer seals batches at BatchMaxAge (sealAged). Once there is
// nothing left for it to do (settledFlusher) it stops ticking until a batch opens.
func (p *Pipeline) flusher() {
	defer p.wg.Done()
	tick := time.Second // the drain rate's period
	if p.sweepsTenants() {
		tick = min(max(p.cfg.BatchMaxAge/4, time.Millisecond), 100*time.Millisecond)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	lastDrained, lastAt := p.drained.Load(), time.Now()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			if p.settledFlusher() {
				t.Stop()
				if !p.sleepFlusher() {
					return
				}
				t.Reset(tick)
				// The rate decays as the updates it skipped would have decayed it, one step a
				// second: what drained meanwhile (batches sealed by the request that opened
				// them, which do not wake it) is not counted, so that it does not read as the
				// drain of the next second.
				lastDrained = p.drained.Load()
				if secs := int(time.Since(lastAt) / time.Second); secs > 0 {
					r := p.rate.Load()
					for range min(secs, 64) {
						r = r * 3 / 4
					}
					p.rate.Store(r)
					lastAt = lastAt.Add(time.Duration(secs) * time.Second)
				}
				continue
			}
			if ts := p.cfg.Tenants; ts != nil && ts.Idle() > 0 {
				// Idle tenants leave without traffic too: otherwise the tenants of a quiet
				// gateway stay counted in otlpgate_tenants, and in memory, until the next request.
				ts.SweepSoon()
			}
			if dt := now.Sub(lastAt); dt >= time.Second {
				d := p.drained.Load()
				cur := int64(float64(d-lastDrained) / dt.Seconds())
				// Smooth over about four seconds so one quiet second does not read as a stall.
				p.rate.Store((p.rate.Load()*3 + cur) / 4)
				lastDrained, lastAt = d, now
			}
		}
	}
}

// sweepsTenants reports whether the flusher has idle tenants to sweep (-intake.tenant-idle),
// so that every batch that opens must wake it, even one sealed at once.
func (p *Pipeline) sweepsTenants() bool {
	ts := p.cfg.Tenants
	return ts != nil && ts.Idle() > 0
}

// settledFlusher reports whether the flusher has nothing to do until a batch opens: no batch
// is open (none can reach BatchMaxAge) or queued (none can drain: the drain rate only decays,
// which the flusher catches up on when it wakes), and no tenant is in the table to go idle.
// Flusher goroutine only.
func (p *Pipeline) settledFlusher() bool {
	if p.queued.Load() != 0 {
		return false
	}
	if p.sweepsTenants() && p.cfg.Tenants.Len() > 0 {
		return false
	}
	for i := range p.sig {
		s := &p.sig[i]
		s.mu.Lock()
		n := s.mu.open.len()
		s.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// sleepFlusher waits until a batch opens (wakeFlusher) and returns true, or returns false when
// the pipeline stops. asleep is set before the open sets are looked at again, each under its
// signal's lock, and wakeFlusher reads it under that lock after putting a batch: either this
// look sees the batch, or that read sees asleep and sends the wake-up. A wake-up left in the
// channel by a batch that opened during the look costs one tick later. Flusher goroutine only.
func (p *Pipeline) sleepFlusher() bool {
	p.asleep.Store(true)
	if !p.settledFlusher() {
		p.asleep.Store(false)
		return true
	}
	select {
	case <-p.stop:
		return false
	case <-p.wake:
		return true
	}
}

// wakeFlusher wakes the flusher if it sleeps: a batch has opened. Called with the signal's
// lock held, after the batch was put in its open set. One atomic load when the flusher is
// awake, as it is under traffic.
func (p *Pipeline) wakeFlusher() {
	if p.asleep.Load() && p.asleep.CompareAndSwap(true, false) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// sealOlder seals every open batch born at or before cutoff (unix nanoseconds); with closing set
// it also shuts each signal for good.
func (p *Pipeline) sealOlder(cutoff int64, closing bool) {
	for i := range p.sig {
		s := &p.sig[i]
		s.mu.Lock()
		s.mu.closed = s.mu.closed || closing
		n := s.mu.open.len()
		s.mu.Unlock()
		if n > 0 {
			p.sealOpen(fastpath.Signal(i), n, cutoff)
		}
	}
}

// Flush seals every open batch now, and returns once the batches it sealed, and those other
// goroutines were sealing meanwhile, are with the destinations (waiting at most
// flushHandOut for the latter: while requests keep coming, some goroutine may always be
// sealing one). Safe for concurrent use.
func (p *Pipeline) Flush() {
	p.sealOlder(1<<63-1, false)
	for deadline := time.Now().Add(flushHandOut); p.handing.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Microsecond) // a seal hands a batch out in microseconds
	}
}

// flushHandOut bounds Flush's wait for batches other goroutines are handing out.
const flushHandOut = time.Second

// QueuedBytes is the admitted bytes not yet finished by every destination. Safe for concurrent use.
func (p *Pipeline) QueuedBytes() int64 { return p.queued.Load() }

// Fill is the admitted bytes not yet finished by every destination and their bound,
// Config.QueueMaxBytes: what the Kafka consumer takes its share of. Safe for concurrent use.
func (p *Pipeline) Fill() (used, limit int64) { return p.queued.Load(), p.cfg.QueueMaxBytes }

// RetryDelay is how long a refused client should wait before trying again: the time the
// destinations need to drain the current queue at their recent rate, between 100ms and 30s.
// Safe for concurrent use.
func (p *Pipeline) RetryDelay() time.Duration {
	const lo, hi = 100 * time.Millisecond, 30 * time.Second
	rate := p.rate.Load()
	if rate <= 0 {
		return 5 * time.Second
	}
	d := time.Duration(float64(p.queued.Load()) / float64(rate) * float64(time.Second))
	return min(max(d, lo), hi)
}

// Close refuses new requests, seals the open batches and stops the flusher. Destinations drain
// on their own schedule (see client/); Close does not wait for them.
func (p *Pipeline) Close() {
	if p.closed.Swap(true) {
		return
	}
	close(p.stop)
	p.wg.Wait()
	// Wait for a kick or a gap timer that may be sealing now (a few microseconds of work);
	// later ones see closed.
	for p.sealers.Load() != 0 {
		time.Sleep(50 * time.Microsecond)
	}
	for i := range p.sig {
		p.sig[i].gap.Stop() // the final seal below takes what it was holding back
		p.sig[i].age.Stop()
	}
	p.sealOlder(1<<63-1, true)
	if p.queued.Load() == 0 {
		livePipelines.remove(p) // else the last finished batch removes it
	}
}
