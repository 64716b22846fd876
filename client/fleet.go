package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// Why a batch (or part of one) was routed again after it was first given to a backend.
const (
	rerouteLeft    = iota // its backend left the resolved set
	rerouteEjected        // its backend kept failing for EjectAfter
	rerouteClosed         // its backend was closing when the batch reached it
	numRerouteReasons
)

var rerouteReasonNames = [numRerouteReasons]string{"left", "ejected", "closing"}

// How route treats a batch that is not being re-routed for one of the reasons above.
const (
	// routeFresh: a batch just given to the fleet. It joins the fresh batches of its owner,
	// and a part that meets a full queue is refused, as a single destination refuses it.
	routeFresh = -1
	// routeHeld: a batch the fleet held (for want of a backend, or because its owner's queue
	// was full when it was re-routed). It was taken long ago, so it goes ahead of the owner's
	// fresh batches, and a full queue parks it in the hold again instead of refusing it.
	routeHeld = -2
)

// Why a fleet gave up on a batch it had taken.
const (
	fleetRefusedFull     = iota // the backend's queue (fresh parts), or the fleet's hold, was full
	fleetRefusedShutdown        // held for want of a backend when the fleet shut down
	numFleetRefusals
)

var fleetRefusalNames = [numFleetRefusals]string{"queue_full", "shutdown"}

var (
	fleetBackends = statusmetrics.Auto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "otlpgate_fleet_backends",
		Help: "Backends a balanced destination sends to: resolved and not ejected.",
	}, []string{"destination"})
	fleetEjections = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_ejections_total",
		Help: "Backends taken out of the set after failing for eject-after; their data was routed to the others.",
	}, []string{"destination"})
	fleetReadmissions = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_readmissions_total",
		Help: "Ejected backends admitted again once they connected.",
	}, []string{"destination"})
	fleetRerouted = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_rerouted_items_total",
		Help: "Spans, data points and log records sent to another backend than the one first chosen, by reason (left: it left the resolved set; ejected: it kept failing; closing: it was leaving when the batch reached it).",
	}, []string{"destination", "reason"})
	fleetDuplicates = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_possible_duplicate_items_total",
		Help: "Re-routed items that had been sent to their first backend without an answer: that backend may have them too.",
	}, []string{"destination"})
	fleetRefused = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_refused_items_total",
		Help: "Items a balanced destination gave up on after taking them, by reason (queue_full: a fresh part met its backend's full queue-bytes, or the fleet's hold was full at queue-bytes; shutdown: still held at shutdown).",
	}, []string{"destination", "reason"})
	fleetHeldBytes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "otlpgate_fleet_held_bytes",
		Help: "Bytes a balanced destination holds while it has no backend, or while the backend of re-routed data has a full queue (bounded by queue-bytes).",
	}, []string{"destination"})
	fleetUnsplittable = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_unsplittable_batches_total",
		Help: "Batches that did not parse for splitting and went whole to one backend.",
	}, []string{"destination"})
	fleetResolveErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fleet_resolve_errors_total",
		Help: "Failed resolutions of the backend set (DNS, endpoints file); the previous set stays.",
	}, []string{"destination"})
)

type fleetMetrics struct {
	backends, held              prometheus.Gauge
	ejections, readmissions     prometheus.Counter
	rerouted                    [numRerouteReasons]prometheus.Counter
	duplicates                  prometheus.Counter
	refused                     [numFleetRefusals]prometheus.Counter
	unsplittable, resolveErrors prometheus.Counter
}

func newFleetMetrics(name string) *fleetMetrics {
	m := &fleetMetrics{
		backends:      fleetBackends.WithLabelValues(name),
		held:          fleetHeldBytes.WithLabelValues(name),
		ejections:     fleetEjections.WithLabelValues(name),
		readmissions:  fleetReadmissions.WithLabelValues(name),
		duplicates:    fleetDuplicates.WithLabelValues(name),
		unsplittable:  fleetUnsplittable.WithLabelValues(name),
		resolveErrors: fleetResolveErrors.WithLabelValues(name),
	}
	for i := range m.rerouted {
		m.rerouted[i] = fleetRerouted.WithLabelValues(name, rerouteReasonNames[i])
	}
	for i := range m.refused {
		m.refused[i] = fleetRefused.WithLabelValues(name, fleetRefusalNames[i])
	}
	return m
}

// Fleet is a balanced destination: one -dest with a resolver, whose backends are each a full
// Dest built from the same settings. It splits every batch by key (pipeline.Splitter) and
// hands each part to the backend that owns the key under rendezvous hashing. It implements
// pipeline.Destination.
//
// Invariants:
//
//  1. The routing view is replaced before a backend is handed over (left or ejected): a batch
//     that reaches a closing backend finds ErrClosed and is routed again on the newer view.
//  2. Every batch the fleet took is, at any time, in exactly one backend, in the hold, or
//     being routed; it is finished only by a backend, or by the fleet when a fresh part meets
//     a full backend or the hold refuses it (counted).
//  3. An ejected member's Dest is a probe: built, never started, holding nothing; it is started
//     when it connects, and the member is admitted again.
//  4. A batch routed again (re-routed, or out of the hold) goes ahead of its new owner's fresh
//     batches, and is held rather than refused when that owner's queue is full: it was taken,
//     and maybe acknowledged, long ago. The watcher routes the hold again on every tick.
//
// Goroutines: one watcher (resolution, eject checks, probes) and one per handover in progress;
// all of them have returned when Shutdown returns, and so have the backends'.
type Fleet struct {
	cfg     Config
	bal     fastpath.SplitKey
	log     *slog.Logger
	baseLog *slog.Logger // for the members, which name the destination themselves
	m       *fleetMetrics
	res     resolver
	view    atomic.Pointer[fleetView]
	// queueBytes bounds the hold and each backend's queue: cfg.QueueBytes until SetQueueBytes.
	queueBytes atomic.Int64

	mu struct {
		sync.Mutex
		members   map[string]*member
		hold      []*pipeline.Batch // batches waiting for a backend or for room in one, oldest first
		holdBytes int64
		closed    bool
	}
	resolveMu sync.Mutex // one resolution at a time: the file resolver keeps state

	ctx       context.Context // ends when Shutdown begins: handovers stop waiting
	cancel    context.CancelFunc
	stop      chan struct{}
	closed    atomic.Bool
	started   atomic.Bool
	shut      atomic.Bool
	wg        sync.WaitGroup // the watcher
	handovers sync.WaitGroup
}

var _ pipeline.Destination = (*Fleet)(nil)

// member is one resolved backend. Its fields are guarded by Fleet.mu.
type member struct {
	addr         string
	d            *Dest
	ejected      bool
	lastAcked    uint64
	failingSince int64 // nanotime of the first check that saw it failing, 0 while healthy
	// ejections counts the ejections since the member last answered anything; readmitAt is
	// when an ejected member may be admitted again (nanotime). A backend whose connection is up
	// but that never answers would otherwise flap in and out every eject-after, moving its
	// keys and re-routing its requests each time.
	ejections int
	readmitAt int64
	// ejectedAt and readmittedAt are when it was last ejected and last admitted again
	// (nanotime), for the back-off's tests.
	ejectedAt, readmittedAt int64
}

// readmitDelay is how long a member stays ejected after its nth ejection in a row: twice
// eject-after, doubling with each ejection that was not followed by an answer, up to 64 times.
func readmitDelay(ejectAfter time.Duration, n int) int64 {
	return int64(ejectAfter) << min(n, 6)
}

// fleetView is an immutable routing set: the admitted backends, sorted by address.
type fleetView struct {
	addrs []string
	dests []*Dest
	hrw   rendezvous
}

// Pick implements fastpath.Picker.
func (v *fleetView) Pick(key uint64) int { return v.hrw.Pick(key) }

// NewFleet checks cfg (whose Resolver must be set) and prepares the fleet without resolving:
// Start does. log may be nil. Safe for concurrent use.
func NewFleet(cfg Config, log *slog.Logger) (*Fleet, error) {
	if cfg.Resolver == "" {
		return nil, fmt.Errorf("client: destination %q: a fleet needs a resolver", cfg.Name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bal, err := parseBalance(cfg.Balance)
	if err != nil {
		return nil, err
	}
	// A member's settings must build: check them once with a placeholder address.
	if err := cfg.member("127.0.0.1:1").Validate(); err != nil {
		return nil, err
	}
	res, err := newResolver(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Fleet{cfg: cfg, bal: bal, log: log.With("destination", cfg.Name), baseLog: log, m: newFleetMetrics(cfg.Name), res: res,
		stop: make(chan struct{})}
	f.queueBytes.Store(cfg.QueueBytes)
	f.mu.members = map[string]*member{}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

// member is the configuration of the backend at addr.
func (c Config) member(addr string) Config {
	m := c
	m.Resolver, m.Endpoints, m.EndpointsFile, m.Lookup = "", nil, "", nil
	m.Endpoint = addr
	m.fleetMember = true
	return m
}

// Name implements pipeline.Destination. Safe for concurrent use.
func (f *Fleet) Name() string { return f.cfg.Name }

// Signals implements pipeline.SignalSelector: what signals= says. Safe for concurrent use.
func (f *Fleet) Signals() fastpath.SignalSet { return f.cfg.Signals }

// Config returns the configuration the fleet runs with, QueueBytes as SetQueueBytes last set
// it. Safe for concurrent use.
func (f *Fleet) Config() Config {
	c := f.cfg
	c.QueueBytes = f.queueBytes.Load()
	return c
}

// SetQueueBytes makes n (positive) the bound on the fleet's hold and on each backend's queue,
// those that join later included (Dest.SetQueueBytes). Safe for concurrent use.
func (f *Fleet) SetQueueBytes(n int64) {
	if n <= 0 {
		return
	}
	// Stored before the members are visited: a backend created meanwhile (under f.mu) either
	// read the new bound or is in the map when the loop runs.
	f.queueBytes.Store(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.mu.members {
		m.d.SetQueueBytes(n)
	}
}

// memberConfig is the configuration of the backend at addr, with the fleet's current queue
// bound. Called with f.mu held, so that SetQueueBytes reaches every backend it creates.
func (f *Fleet) memberConfig(addr string) Config {
	c := f.cfg.member(addr)
	c.QueueBytes = f.queueBytes.Load()
	return c
}

// Backends returns the addresses batches are routed to now, sorted. Safe for concurrent use.
func (f *Fleet) Backends() []string {
	if v := f.view.Load(); v != nil {
		return slices.Clone(v.addrs)
	}
	return nil
}

// Start resolves the backend set, starts a Dest per backend and the watcher. A failed first
// resolution is logged and tried again every ResolveInterval; meanwhile batches are held.
// Call it once, before Shutdown.
func (f *Fleet) Start() {
	if f.started.Swap(true) || f.shut.Load() {
		return
	}
	if err := f.refresh(false); err != nil {
		f.log.Error("cannot resolve the backends; trying again", "err", err, "every", f.cfg.ResolveInterval)
	}
	f.wg.Add(1)
	go f.watch()
}

// Reload resolves the backend set now, re-reading the endpoints file even if it looks
// unchanged (SIGHUP). On error the current set stays. Safe for concurrent use.
func (f *Fleet) Reload() error { return f.refresh(true) }

// Enqueue implements pipeline.Destination: it splits b by key and queues each part on its
// backend; with no backend it holds b until one appears, refusing it with pipeline.ErrFull
// past QueueBytes. It never blocks on the network. Safe for concurrent use.
func (f *Fleet) Enqueue(b *pipeline.Batch) error {
	if f.closed.Load() {
		return pipeline.ErrClosed
	}
	v := f.view.Load()
	if v == nil || len(v.dests) == 0 {
		return f.hold(b)
	}
	f.route(v, b, routeFresh)
	return nil
}

// route splits b over v and hands the parts to their backends; reason is one of the reroute
// reasons (the items are counted as re-routed), routeFresh or routeHeld.
func (f *Fleet) route(v *fleetView, b *pipeline.Batch, reason int) {
	s := pipeline.GetSplitter()
	defer pipeline.PutSplitter(s)
	whole, parts, err := s.Split(b, f.bal, len(v.dests), v)
	if err != nil {
		f.m.unsplittable.Inc()
	}
	if whole >= 0 {
		f.send(v, whole, b, reason)
		return
	}
	for i, k := range parts {
		if k != nil {
			f.send(v, i, k, reason)
		}
	}
}

func (f *Fleet) send(v *fleetView, i int, b *pipeline.Batch, reason int) {
	items := float64(b.Items)
	if reason >= 0 {
		f.m.rerouted[reason].Add(items)
	}
	var err error
	if reason == routeFresh {
		err = v.dests[i].Enqueue(b)
	} else {
		err = v.dests[i].enqueueFirst(b)
	}
	switch {
	case err == nil:
	case errors.Is(err, pipeline.ErrClosed):
		// The backend is being handed over: the view that replaced v routes around it.
		if nv := f.view.Load(); nv != nil && nv != v && len(nv.dests) > 0 {
			f.route(nv, b, rerouteClosed)
			return
		}
		f.m.rerouted[rerouteClosed].Add(items)
		if f.hold(b) != nil {
			b.Done(false)
		}
	case reason == routeFresh:
		f.m.refused[fleetRefusedFull].Add(items)
		b.Done(false)
	default:
		// Its owner is momentarily full: wait in the hold for the next tick of the watcher.
		if f.park(b) != nil {
			b.Done(false)
		}
	}
}

// hold keeps b until a backend appears. On an error b was not taken (and is counted).
func (f *Fleet) hold(b *pipeline.Batch) error {
	if err := f.park(b); err != nil {
		return err
	}
	// A backend may have appeared since the caller looked.
	if v := f.view.Load(); v != nil && len(v.dests) > 0 {
		f.flush()
	}
	return nil
}

// park keeps b in the hold, bounded by QueueBytes, until flush routes it again. On an error b
// was not taken (and is counted).
func (f *Fleet) park(b *pipeline.Batch) error {
	n := int64(b.Len())
	f.mu.Lock()
	if f.mu.closed {
		f.mu.Unlock()
		f.m.refused[fleetRefusedShutdown].Add(float64(b.Items))
		return pipeline.ErrClosed
	}
	if f.mu.holdBytes+n > f.queueBytes.Load() && f.mu.holdBytes > 0 { // an oversized batch alone is held, as Dest.Enqueue takes it
		f.mu.Unlock()
		f.m.refused[fleetRefusedFull].Add(float64(b.Items))
		return pipeline.ErrFull
	}
	f.mu.hold = append(f.mu.hold, b)
	f.mu.holdBytes += n
	f.m.held.Add(float64(n))
	f.mu.Unlock()
	return nil
}

// flush routes the held batches, oldest first, if there is a backend. Those that meet a full
// queue again are parked again, behind any batch held meanwhile.
func (f *Fleet) flush() {
	v := f.view.Load()
	if v == nil || len(v.dests) == 0 {
		return
	}
	f.mu.Lock()
	if len(f.mu.hold) == 0 {
		f.mu.Unlock()
		return
	}
	held := f.mu.hold
	f.mu.hold = nil
	f.m.held.Sub(float64(f.mu.holdBytes))
	f.mu.holdBytes = 0
	f.mu.Unlock()
	for _, b := range held {
		f.route(v, b, routeHeld)
	}
}

// refresh resolves the set and applies it.
func (f *Fleet) refresh(force bool) error {
	f.resolveMu.Lock()
	defer f.resolveMu.Unlock()
	ctx, cancel := context.WithTimeout(f.ctx, max(f.cfg.ResolveInterval, time.Second))
	addrs, err := f.res.resolve(ctx, force)
	cancel()
	if err != nil {
		f.m.resolveErrors.Inc()
		return fmt.Errorf("client: destination %q: %w", f.cfg.Name, err)
	}
	f.apply(addrs)
	return nil
}

// apply makes addrs (sorted) the backend set: new backends start, departed ones are handed
// over and their batches routed to the keys' new owners.
func (f *Fleet) apply(addrs []string) {
	f.mu.Lock()
	if f.mu.closed {
		f.mu.Unlock()
		return
	}
	var gone []*member
	for a, m := range f.mu.members {
		if _, ok := slices.BinarySearch(addrs, a); !ok {
			delete(f.mu.members, a)
			gone = append(gone, m)
		}
	}
	var added []string
	for _, a := range addrs {
		if _, ok := f.mu.members[a]; ok {
			continue
		}
		d, err := newDest(f.memberConfig(a), a, f.baseLog)
		if err != nil {
			f.log.Error("cannot create backend", "backend", a, "err", err)
			continue
		}
		d.Start()
		f.mu.members[a] = &member{addr: a, d: d}
		added = append(added, a)
	}
	changed := len(gone) > 0 || len(added) > 0
	if changed || f.view.Load() == nil {
		f.publishLocked()
	}
	f.mu.Unlock()
	if changed {
		var left []string
		for _, m := range gone {
			left = append(left, m.addr)
		}
		f.log.Info("backends changed", "added", added, "left", left, "backends", len(addrs))
	}
	for _, m := range gone {
		if m.ejected {
			m.d.Shutdown(f.ctx) // a probe: it holds nothing
			f.forgetIfGone(m.addr)
			continue
		}
		ctx, cancel := context.WithTimeout(f.ctx, f.cfg.AckTimeout)
		f.handover(m.d, ctx, cancel, rerouteLeft)
	}
	f.flush()
}

// publishLocked replaces the routing view by the admitted members.
func (f *Fleet) publishLocked() {
	v := &fleetView{}
	for a, m := range f.mu.members {
		if !m.ejected {
			v.addrs = append(v.addrs, a)
		}
	}
	slices.Sort(v.addrs)
	for _, a := range v.addrs {
		v.dests = append(v.dests, f.mu.members[a].d)
	}
	v.hrw = newRendezvous(v.addrs)
	f.view.Store(v)
	f.m.backends.Set(float64(len(v.addrs)))
}

// handover takes back d's batches on a goroutine of its own and routes each on the view of
// the moment.
func (f *Fleet) handover(d *Dest, ctx context.Context, cancel context.CancelFunc, reason int) {
	f.handovers.Add(1)
	go func() {
		defer f.handovers.Done()
		defer cancel()
		d.Handover(ctx, func(b *pipeline.Batch, sent bool) {
			if sent {
				f.m.duplicates.Add(float64(b.Items))
			}
			v := f.view.Load()
			if v == nil || len(v.dests) == 0 {
				f.m.rerouted[reason].Add(float64(b.Items))
				if f.hold(b) != nil {
					b.Done(false)
				}
				return
			}
			f.route(v, b, reason)
		})
		if reason == rerouteLeft {
			f.forgetIfGone(d.backend)
		}
	}()
}

// forgetIfGone deletes the metric series of backend addr unless it is a member again (it may
// have come back while its old Dest was handed over).
func (f *Fleet) forgetIfGone(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.members[addr] == nil {
		forgetBackend(f.cfg.Name, addr)
	}
}

// watch resolves every ResolveInterval and checks the backends' health several times per
// EjectAfter.
func (f *Fleet) watch() {
	defer f.wg.Done()
	every := f.cfg.ResolveInterval
	if f.cfg.EjectAfter > 0 {
		every = min(every, max(f.cfg.EjectAfter/10, 10*time.Millisecond))
	}
	every = min(every, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			if now.Sub(last) >= f.cfg.ResolveInterval {
				last = now
				if err := f.refresh(false); err != nil {
					f.log.Warn("cannot resolve the backends; keeping the current set", "err", err)
				}
			}
			f.check()
		}
	}
}

// check ejects the backends that failed for EjectAfter (requests outstanding and none
// acknowledged) and admits again the ejected ones that connected.
func (f *Fleet) check() {
	now := nanotime()
	var ejected []*Dest
	changed := false
	f.mu.Lock()
	if f.mu.closed {
		f.mu.Unlock()
		return
	}
	for _, m := range f.mu.members {
		if m.ejected {
			if now >= m.readmitAt && m.d.connected() {
				m.d.Start()
				m.ejected, m.failingSince, m.readmittedAt = false, 0, now
				m.lastAcked, _ = m.d.health()
				changed = true
				f.m.readmissions.Inc()
				f.log.Info("backend admitted again", "backend", m.addr)
			}
			continue
		}
		if f.cfg.EjectAfter <= 0 {
			continue
		}
		acked, outstanding := m.d.health()
		if acked != m.lastAcked {
			m.ejections = 0 // it answers: the next ejection starts the back-off over
		}
		if outstanding == 0 || acked != m.lastAcked {
			m.lastAcked, m.failingSince = acked, 0
			continue
		}
		if m.failingSince == 0 {
			m.failingSince = now
			continue
		}
		if now-m.failingSince < int64(f.cfg.EjectAfter) {
			continue
		}
		probe, err := newDest(f.memberConfig(m.addr), m.addr, f.baseLog)
		if err != nil {
			f.log.Error("cannot create backend probe", "backend", m.addr, "err", err)
			continue
		}
		ejected = append(ejected, m.d)
		m.d, m.ejected, m.failingSince = probe, true, 0
		m.ejections++
		m.readmitAt, m.ejectedAt = now+readmitDelay(f.cfg.EjectAfter, m.ejections), now
		changed = true
		f.m.ejections.Inc()
		f.log.Warn("backend ejected: no answer", "backend", m.addr, "for", f.cfg.EjectAfter, "outstanding", outstanding)
		probe.connected() // start connecting
	}
	if changed {
		f.publishLocked()
	}
	f.mu.Unlock()
	for _, d := range ejected {
		// It does not answer: hand back everything at once, pending requests included.
		ctx, cancel := context.WithCancel(f.ctx)
		cancel()
		f.handover(d, ctx, cancel, rerouteEjected)
	}
	// Batches held while a backend was full, or while there was none, try again on each tick.
	f.flush()
}

// drainHold routes the hold again until it is empty, while there is a backend and ctx allows:
// batches parked because their backend was full wait for room, which the backends, still
// sending, make.
func (f *Fleet) drainHold(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		f.flush()
		f.mu.Lock()
		empty := len(f.mu.hold) == 0
		f.mu.Unlock()
		if v := f.view.Load(); empty || v == nil || len(v.dests) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Shutdown stops resolving, waits for handovers in progress, routes the hold again until it is
// empty (while there is a backend and ctx allows), then shuts every backend down in parallel
// as Dest.Shutdown does (while ctx allows). Batches still held are finished undelivered,
// counted in otlpgate_fleet_refused_items_total{reason="shutdown"}. Call it once; safe for concurrent use with everything else.
func (f *Fleet) Shutdown(ctx context.Context) error {
	if f.shut.Swap(true) {
		return errors.New("client: Shutdown called twice")
	}
	f.closed.Store(true)
	close(f.stop)
	f.wg.Wait()
	// Handovers stop waiting for answers and route what they hold to the remaining backends,
	// which then drain it below.
	f.cancel()
	f.handovers.Wait()
	f.drainHold(ctx)
	f.mu.Lock()
	f.mu.closed = true
	held := f.mu.hold
	f.mu.hold = nil
	f.m.held.Sub(float64(f.mu.holdBytes))
	f.mu.holdBytes = 0
	var ds []*Dest
	for _, m := range f.mu.members {
		ds = append(ds, m.d)
	}
	f.mu.Unlock()
	lost := 0
	for _, b := range held {
		if b.Kept() {
			// The spool's batch, its feeder stopped: its records stay on disk for the
			// destination's replacement or the next start, as a member's would (Dest.drop).
			returnedRequests.WithLabelValues(f.cfg.Name, "").Inc()
			returnedItems.WithLabelValues(f.cfg.Name, "").Add(float64(b.Items))
			if t := f.cfg.Tally; t != nil {
				t.returned.Add(int64(b.Items))
			}
			b.Done(false)
			continue
		}
		lost++
		f.m.refused[fleetRefusedShutdown].Add(float64(b.Items))
		b.Done(false)
	}
	errc := make(chan error, len(ds))
	for _, d := range ds {
		go func() { errc <- d.Shutdown(ctx) }()
	}
	var errs []error
	for range ds {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	if lost > 0 {
		errs = append(errs, fmt.Errorf("client: destination %q: %d batches held without a backend at shutdown", f.cfg.Name, lost))
	}
	return errors.Join(errs...)
}
