package feed

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/otlpgate/otlpgate/spool"
)

// Config of a Feeder.
type Config struct {
	// MaxBytes bounds the bytes of batches handed to the destination and not yet finished by
	// it: the destination's share of -queue.max-bytes. One batch may go past it.
	MaxBytes int64
	// BatchMaxBytes, BatchMaxItems and BatchMaxAge shape batches as the pipeline's do
	// (-batch.max-bytes, -batch.max-items, -batch.max-age). A record larger than BatchMaxBytes
	// travels alone. While no batch of the feeder is in the destination's hands a batch leaves
	// as soon as the spool has nothing more to read; otherwise it waits for more up to
	// BatchMaxAge (the pipeline's eager sealing).
	BatchMaxBytes int
	BatchMaxItems int
	BatchMaxAge   time.Duration
	// Tenants, with -intake.headers, reads each record's tenant back from its meta: a batch
	// holds records of one tenant, and a record whose tenant destination Dest (numbered as in
	// the table's routes when the feeder is made; SetRoute moves it) does not take is finished
	// unread by it. nil: every record goes to the destination, without a tenant.
	Tenants *tenant.Table
	Dest    int
	// Router, with routes by resource attribute (-dest match=resource), is the pipeline's
	// (pipeline.Config.Router) when the feeder is made; SetRoute replaces it: of each record
	// the feeder keeps the resource entries destination Dest takes, and finishes a record of
	// which it takes none unread. nil: every entry goes to the destination.
	Router pipeline.Router
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MaxBytes <= 0:
		return errors.New("feed: max bytes must be positive")
	case c.BatchMaxBytes <= 0 || c.BatchMaxItems <= 0:
		return errors.New("feed: batch limits must be positive")
	case c.BatchMaxAge <= 0:
		return errors.New("feed: batch max age must be positive")
	}
	return nil
}

// Feeder feeds one destination from its spool reader. See the package documentation.
//
// Invariants:
//  1. Every record Next returned is in exactly one place: the batch being built (cur), the
//     carried record, or a batch handed over (its held); it leaves by Finish, Drop or, once
//     stopping, by being left unfinished for the next start.
//  2. held and batches count the batches handed over whose BatchDone has not run.
type Feeder struct {
	cfg  Config
	seal pipeline.Seal // the pipeline's rule, from cfg's batch bounds
	r    *spool.Reader
	d    pipeline.Destination
	log  *slog.Logger
	// enc is the encoding whose compressed records the destination sends as they are
	// (pipeline.WireEncoder); the others are inflated.
	enc pipeline.Encoding
	// sigs is what the destination takes (-dest signals=): its feeder finishes the records
	// of the others unread, so that they hold no spool space on its account.
	sigs fastpath.SignalSet
	// route is the destination's place among the destinations' routes (Config.Dest in the
	// table's routes and Config.Router at New; SetRoute replaces it): read once per record.
	route atomic.Pointer[routeView]

	held     atomic.Int64
	maxBytes atomic.Int64 // Config.MaxBytes, or what SetMaxBytes set since
	batches  atomic.Int32
	room     chan struct{} // a handed-over batch finished
	stopping atomic.Bool   // Stop began: given-up batches leave their records unfinished
	stop     chan struct{}
	done     chan struct{}
	started  atomic.Bool

	// Owned by the run goroutine.
	cur   building
	carry *[]byte // a record read that did not fit cur, payload bytes
	carE  spool.Entry
	carT  *tenant.Tenant
	rec   record // the record the filters are deciding on (fill)
	hint  int    // size of the last batch handed over, to size the next one
	timer *time.Timer
	unzip inflater
}

// building is the batch being filled.
type building struct {
	payload *pool.Payload
	h       *held
	sig     uint8
	tenant  *tenant.Tenant
	enc     pipeline.Encoding // of every record in it: a pass-through batch when not none
	items   int
	plain   int // the records' bytes inflated: what the batch limits apply to
	born    time.Time
}

var errTenantRecord = errors.New("feed: a spooled record's tenant cannot be read")

// held is one batch in the destination's hands: the records to finish when it is done.
type held struct {
	f    *Feeder
	pos  []spool.Pos
	size int64
}

var helds = sync.Pool{New: func() any { return new(held) }}

var (
	_ pipeline.RejectOwner = (*held)(nil)
	_ pipeline.KeepOwner   = (*held)(nil)
)

// New returns a feeder of d from r. log may be nil.
func New(cfg Config, r *spool.Reader, d pipeline.Destination, log *slog.Logger) (*Feeder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil || d == nil {
		return nil, errors.New("feed: nil reader or destination")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	f := &Feeder{cfg: cfg, seal: pipeline.Seal{MaxBytes: cfg.BatchMaxBytes, MaxItems: cfg.BatchMaxItems, MaxAge: cfg.BatchMaxAge}, r: r, d: d, log: log.With("destination", d.Name()),
		room: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), timer: t}
	if w, ok := d.(pipeline.WireEncoder); ok {
		f.enc = w.PassThrough() // a record filtered by routes is inflated (filterInflate)
	}
	f.sigs = pipeline.SignalsOf(d)
	f.maxBytes.Store(cfg.MaxBytes)
	route := Route{Tenants: tenant.DestRoute{Dest: cfg.Dest}, Resources: cfg.Router}
	if cfg.Tenants != nil {
		route.Tenants = cfg.Tenants.RouteOf(cfg.Dest)
	}
	f.route.Store(&routeView{cur: route})
	return f, nil
}

// Route is a feeder's destination's place in a set of destinations: the set's tenant routes
// with the destination's position in it (Tenants.Dest), and the router of the set's
// match=resource, which numbers the destinations alike (Resources; nil: none, the
// destination takes every entry of the records it takes).
type Route struct {
	Tenants   tenant.DestRoute
	Resources pipeline.Router
}

// routeView is where a feeder's destination stands among the destinations, by when a record
// was spooled: a record at or after from goes by cur, an earlier one by prev (none: by cur).
// Immutable once stored.
type routeView struct {
	cur  Route
	from spool.Pos
	prev *routeView
}

// of is the route of the record at p.
func (v *routeView) of(p spool.Pos) Route {
	for v.prev != nil && p < v.from {
		v = v.prev
	}
	return v.cur
}

// SetRoute gives the feeder its destination's place r in a new set of destinations (a reload
// that reordered, added or removed destinations with tenant or resource routes), the routes and the
// position together, for the records spooled from from on (Spool.Written when the routes
// changed); the records spooled before go by the routes they were admitted under, as a batch
// open across a reload without a spool goes to the destinations of its set. from 0 makes r
// the route of every record (a feeder new to the set: its reader holds nothing spooled
// under routes it was not in, or what it left unfinished when it was removed). A record
// already decided (in the batch being built) keeps its decision. Safe for concurrent use.
func (f *Feeder) SetRoute(r Route, from spool.Pos) {
	for {
		old := f.route.Load()
		v := &routeView{cur: r}
		if from > 0 && old != nil {
			v.from, v.prev = from, old
		}
		if f.route.CompareAndSwap(old, v) {
			return
		}
	}
}

// SetMaxBytes replaces Config.MaxBytes (which must stay positive): the feeders share
// -queue.max-bytes, and the share changes when destinations come or go while otlpgate runs. A
// lower bound holds from the next batch on. Safe for concurrent use.
func (f *Feeder) SetMaxBytes(n int64) {
	if n <= 0 {
		panic("BUG: feed: max bytes must be positive")
	}
	f.maxBytes.Store(n)
	select {
	case f.room <- struct{}{}: // a raised bound may let a waiting batch go
	default:
	}
}

// Start starts the feeding goroutine. Call it once.
func (f *Feeder) Start() {
	if f.started.Swap(true) {
		return
	}
	go f.run()
}

// Stop stops reading the spool and waits for the goroutine to end. Batches the destination
// holds are finished by it as usual: delivered ones are finished in the spool, given-up ones
// stay for the next start. Call it before the destination's Shutdown. Safe to call once.
func (f *Feeder) Stop() {
	f.stopping.Store(true)
	close(f.stop)
	if f.started.Load() {
		<-f.done
	}
}

// HeldBytes is the bytes handed to the destination and not finished. Safe for concurrent use.
func (f *Feeder) HeldBytes() int64 { return f.held.Load() }

func (f *Feeder) run() {
	defer close(f.done)
	defer f.abandon()
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		if f.held.Load() >= f.maxBytes.Load() {
			if !f.wait(f.room, nil, 0) {
				return
			}
			continue
		}
		full, err := f.fill()
		if err != nil && err != spool.ErrEmpty {
			f.log.Error("cannot read the spool; trying again in a second", "err", err)
			if !f.wait(nil, nil, time.Second) {
				return
			}
			continue
		}
		if f.cur.payload == nil {
			if !f.wait(f.r.Ready(), nil, 0) {
				return
			}
			continue
		}
		if !full && f.batches.Load() > 0 {
			if age := time.Since(f.cur.born); age < f.seal.MaxAge {
				// The destination is busy: let the batch grow, as the pipeline's eager sealing does.
				if !f.wait(f.r.Ready(), f.room, f.seal.MaxAge-age) {
					return
				}
				continue
			}
		}
		if !f.send() {
			return
		}
	}
}

// wait blocks until a or b (either may be nil) receives, dur passes (0: no limit) or Stop; it
// reports false on Stop.
func (f *Feeder) wait(a, b <-chan struct{}, dur time.Duration) bool {
	var tc <-chan time.Time
	if dur > 0 {
		f.timer.Reset(dur)
		defer f.timer.Stop()
		tc = f.timer.C
	}
	select {
	case <-a:
	case <-b:
	case <-tc:
	case <-f.stop:
		return false
	}
	return true
}

// fill reads records into cur until it is full (true), the reader has nothing more
// (spool.ErrEmpty) or reading fails.
func (f *Feeder) fill() (bool, error) {
	if f.carry != nil {
		f.open(len(*f.carry))
		buf := f.cur.payload.Buf()
		*buf = append(*buf, *f.carry...)
		pool.PutBytes(f.carry)
		f.carry = nil
		if f.add(f.carE, f.carT) {
			return true, nil
		}
	}
	for {
		if f.cur.payload == nil {
			f.open(0)
		}
		buf := f.cur.payload.Buf()
		before := len(*buf)
		e, err := f.r.Next(buf)
		if err != nil {
			if len(f.cur.h.pos) == 0 {
				f.close()
			}
			return false, err
		}
		f.rec = record{buf: buf, before: before, e: e}
		if !f.filter() {
			*buf = (*buf)[:before]
			if len(f.cur.h.pos) == 0 {
				f.close()
			}
			continue
		}
		e, t := f.rec.e, f.rec.t
		f.rec = record{}
		if f.startsNext(e, t) {
			// It belongs to the next batch: carry its bytes over (one copy per batch at most).
			f.carry = pool.GetBytes(len(*buf) - before)
			*f.carry = append(*f.carry, (*buf)[before:]...)
			f.carE, f.carT = e, t
			*buf = (*buf)[:before]
			return true, nil
		}
		if f.add(e, t) {
			return true, nil
		}
	}
}

// record is the record fill has just read, as the filters see it: its bytes are
// (*buf)[before:], which a filter may rewrite.
type record struct {
	buf    *[]byte
	before int
	e      spool.Entry
	t      *tenant.Tenant // its tenant, once filterTenant read it
	route  Route          // the routes it was spooled under, once filterTenant read them
}

// recordFilters decide, in order, what of a record joins this destination's batches. Each
// keeps the record (true), possibly rewritten, or finishes or drops it itself and leaves it
// out (false). A new reason to pass over a record is a filter here.
var recordFilters = [...]func(*Feeder) bool{
	(*Feeder).filterSignal,
	(*Feeder).filterTenant,
	(*Feeder).filterInflate,
	(*Feeder).filterRoute,
}

// filter runs f.rec through recordFilters.
func (f *Feeder) filter() bool {
	for _, keep := range recordFilters {
		if !keep(f) {
			return false
		}
	}
	return true
}

// filterSignal leaves out a record of a signal this build does not know (dropped: nothing can
// deliver it) or the destination does not take (finished: those that take it deliver it).
func (f *Feeder) filterSignal() bool {
	e := &f.rec.e
	if e.Signal >= uint8(fastpath.NumSignals) {
		f.r.Drop(e.Pos, spool.DropUndeliverable)
		return false
	}
	if !f.sigs.Has(fastpath.Signal(e.Signal)) {
		f.r.Finish(e.Pos)
		return false
	}
	return true
}

// filterTenant reads the routes the record was spooled under and its tenant, and leaves out
// another destination's (match-header) and one that cannot be read.
func (f *Feeder) filterTenant() bool {
	f.rec.route = f.routeOf(f.rec.e.Pos)
	t, take := f.tenant(f.rec.e, f.rec.route.Tenants)
	f.rec.t = t
	return take
}

// routeOf is the route of the record at p: records come in order, so once one at or after
// the latest SetRoute's from is read, the routes before it are forgotten.
func (f *Feeder) routeOf(p spool.Pos) Route {
	v := f.route.Load()
	route := v.of(p)
	if v.prev != nil && p >= v.from {
		// Nothing before from is read any more. (A CAS: SetRoute may have stored a newer
		// view meanwhile, which keeps this one as its prev.)
		f.route.CompareAndSwap(v, &routeView{cur: v.cur})
	}
	return route
}

// filterInflate inflates a record compressed in an encoding the destination does not send as
// it is (its configuration changed since the record was spooled, or routes filter it): it
// goes on as a plain record like any other, or is dropped when it does not inflate.
func (f *Feeder) filterInflate() bool {
	r := &f.rec
	if r.e.Encoding == 0 || pipeline.Encoding(r.e.Encoding) == f.enc && r.route.Resources == nil {
		return true
	}
	return f.inflate(r.buf, r.before, &r.e)
}

// filterRoute keeps, with routes by resource attribute, the destination's entries of the
// record: finished when it has none, dropped when it does not parse.
func (f *Feeder) filterRoute() bool {
	r := &f.rec
	rt := r.route.Resources
	if rt == nil {
		return true
	}
	buf, before := r.buf, r.before
	rec, items, err := rt.Filter(fastpath.Signal(r.e.Signal), (*buf)[before:], int(r.e.Items), r.route.Tenants.Dest, r.route.Tenants.Mask(r.t))
	switch {
	case err != nil:
		f.log.Error("dropping a spooled record", "err", err)
		f.r.Drop(r.e.Pos, spool.DropUndeliverable)
		return false
	case len(rec) == 0:
		f.r.Finish(r.e.Pos) // another destination's entries only
		return false
	}
	*buf = (*buf)[:before+len(rec)]
	r.e.Items = uint32(items)
	r.e.Size, r.e.Plain = len(rec), len(rec)
	return true
}

// startsNext reports whether a record e of tenant t, kept by the filters, belongs to the next
// batch rather than cur: the batch key (signal, tenant, encoding) differs, or it does not fit
// the seal rule.
func (f *Feeder) startsNext(e spool.Entry, t *tenant.Tenant) bool {
	c := &f.cur
	return len(c.h.pos) > 0 && (e.Signal != c.sig || t != c.tenant || pipeline.Encoding(e.Encoding) != c.enc ||
		!f.seal.Fits(c.plain+e.Plain, c.items+int(e.Items)))
}

// open starts cur with room for at least n bytes.
func (f *Feeder) open(n int) {
	size := max(min(max(f.hint, 4<<10), f.cfg.BatchMaxBytes), n)
	h := helds.Get().(*held)
	h.f = f
	f.cur = building{payload: pool.NewPayload(size), h: h, born: time.Now()}
}

// close gives up an empty cur.
func (f *Feeder) close() {
	f.cur.payload.Release()
	f.putHeld(f.cur.h)
	f.cur = building{}
}

// tenant reads the tenant of e, and reports whether the destination takes it. A record whose
// tenant it does not take is finished at once: the destinations that take it deliver it. A
// record whose tenant cannot be read, or that no destination takes, is dropped, counted by
// the spool: delivering it as another tenant's would hand one tenant's data to another's
// backend.
func (f *Feeder) tenant(e spool.Entry, route tenant.DestRoute) (*tenant.Tenant, bool) {
	ts := f.cfg.Tenants
	if ts == nil {
		return nil, true
	}
	t, err := ts.FromRecord(e.Meta)
	if err != nil {
		f.log.Error("dropping a spooled record", "err", errTenantRecord, "cause", err)
		f.r.Drop(e.Pos, spool.DropUndeliverable)
		return nil, false
	}
	if !route.Routed(t) {
		// Admission refuses such a tenant; a restart or reload whose match-headers no longer
		// take it leaves its spooled records without a destination: counted, not silently
		// finished.
		f.r.Drop(e.Pos, spool.DropUndeliverable)
		return nil, false
	}
	if !route.Takes(t) {
		f.r.Finish(e.Pos)
		return nil, false
	}
	return t, true
}

// add records e of tenant t, whose payload cur already holds, and reports whether cur is
// full.
func (f *Feeder) add(e spool.Entry, t *tenant.Tenant) bool {
	f.cur.sig, f.cur.tenant, f.cur.enc = e.Signal, t, pipeline.Encoding(e.Encoding)
	f.cur.items += int(e.Items)
	f.cur.plain += e.Plain
	f.cur.h.pos = append(f.cur.h.pos, e.Pos)
	return f.seal.Full(f.cur.plain, f.cur.items)
}

// inflate replaces the compressed record e, whose bytes *buf holds from before, by its
// inflated bytes, and e by a plain record's entry. The compressed bytes move to a pooled
// buffer of their own (a tenth of the plain ones, typically), so that the record inflates in
// place in the batch. A record that does not inflate to the length it was spooled with, or in
// an encoding this build does not know, is dropped as undeliverable and counted by the spool;
// it reports false then.
func (f *Feeder) inflate(buf *[]byte, before int, e *spool.Entry) bool {
	if e.Plain > maxPlain {
		f.r.Drop(e.Pos, spool.DropUndeliverable)
		return false
	}
	wire := pool.GetBytes(len(*buf) - before)
	defer pool.PutBytes(wire)
	*wire = append(*wire, (*buf)[before:]...)
	*buf = (*buf)[:before]
	pool.Reserve(buf, e.Plain)
	if err := f.unzip.inflate(pipeline.Encoding(e.Encoding), *wire, (*buf)[before:before+e.Plain]); err != nil {
		f.log.Error("dropping a spooled record that does not inflate", "err", err, "encoding", pipeline.Encoding(e.Encoding).String())
		f.r.Drop(e.Pos, spool.DropUndeliverable)
		return false
	}
	*buf = (*buf)[:before+e.Plain]
	e.Encoding, e.Size = 0, e.Plain
	inflatedRecords.Inc()
	return true
}

// send hands cur to the destination, waiting while its queue is full. It reports false when
// Stop came first or the destination is shutting down; the batch was given up then.
func (f *Feeder) send() bool {
	c := f.cur
	f.cur = building{}
	// The budget counts the buffer's capacity, not its length: a pooled buffer may be up to
	// twice what it holds, and it is the capacity that stays in memory.
	c.h.size = int64(cap(*c.payload.Buf()))
	// The next batch is likely of the same kind: a spool's traffic is compressed or not, as
	// its clients send it.
	f.hint = c.payload.Len()
	var b *pipeline.Batch
	if c.enc == pipeline.EncodingNone {
		b = pipeline.NewBatch(fastpath.Signal(c.sig), c.items, c.payload, c.h)
	} else {
		b = pipeline.NewWireBatch(fastpath.Signal(c.sig), c.items, c.enc, c.plain, c.payload, c.h)
	}
	b.Tenant = c.tenant
	f.held.Add(c.h.size)
	f.batches.Add(1)
	for {
		err := f.d.Enqueue(b)
		if err == nil {
			return true
		}
		if errors.Is(err, pipeline.ErrClosed) {
			f.stopping.Store(true) // the destination stops: what is unfinished stays spooled
			b.Done(false)
			return false
		}
		// Its queue is full (another feeder's share, or a fleet's hand-over): try again when
		// one of ours finishes, or soon.
		if !f.wait(f.room, nil, 50*time.Millisecond) {
			b.Done(false)
			return false
		}
	}
}

// abandon releases what the goroutine holds when it ends; the records stay unfinished.
func (f *Feeder) abandon() {
	f.stopping.Store(true)
	if f.cur.payload != nil {
		f.close()
	}
	if f.carry != nil {
		pool.PutBytes(f.carry)
		f.carry, f.carT = nil, nil
	}
	f.unzip.close()
}

// Keeps implements pipeline.KeepOwner: once Stop began, a batch given up stays unfinished in
// the reader, for the destination's replacement or the next start. Safe for concurrent use.
func (h *held) Keeps() bool { return h.f.stopping.Load() }

// BatchDone implements pipeline.BatchOwner. Safe for concurrent use.
func (h *held) BatchDone(delivered bool) { h.finish(delivered, spool.DropUndeliverable) }

// BatchRejected implements pipeline.RejectOwner: the upstream refused the batch for good, and
// its records are counted as rejected. Safe for concurrent use.
func (h *held) BatchRejected() { h.finish(false, spool.DropRejected) }

// finish finishes h's records, delivered or else dropped for reason, and gives back its bytes.
func (h *held) finish(delivered bool, reason spool.DropReason) {
	f := h.f
	switch {
	case delivered:
		for _, p := range h.pos {
			f.r.Finish(p)
		}
	case f.stopping.Load():
		// Left unfinished: the next start reads these records again.
	default:
		for _, p := range h.pos {
			f.r.Drop(p, reason)
		}
	}
	f.held.Add(-h.size)
	f.batches.Add(-1)
	f.putHeld(h)
	select {
	case f.room <- struct{}{}:
	default:
	}
}

func (f *Feeder) putHeld(h *held) {
	h.f, h.size = nil, 0
	if cap(h.pos) > 1<<16 {
		h.pos = nil
	}
	h.pos = h.pos[:0]
	helds.Put(h)
}
