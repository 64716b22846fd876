package pipeline

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// Routes by resource attribute (a -dest's match=resource:KEY=VALUE): a request is a run of
// resource entries, and a subset of them is a valid request, so admission groups a request's
// entries by the destinations that take them (Config.Router) and each group, a piece, joins
// the open batch of its route (its tenant and that set of destinations, openset.go). The
// entries are copied whole, never decoded below the Resource. A request whose entries all go
// one way is admitted as it came; only a mixed one is copied into pieces.
//
// Admission stays all or nothing: the queue's budget is charged for the whole request and
// every piece joins its batch under the signal's lock, so a request is admitted whole or
// refused whole, and a retried request cannot duplicate a piece. With a spool, the routed
// entries are one record (one append: admitted whole or not at all), and each destination's
// feeder keeps, from each record, the entries its destination takes (Router.Filter).
//
// An entry no destination takes (every destination has a rule, and none of the rules matches
// it) is left out and counted (otlpgate_route_unrouted_*): routes without a destination that
// takes the rest filter, as -drop does. A request left with no entry is answered Success.

// Router groups a request's resource entries by the destinations that take them, and keeps a
// spooled record's entries of one destination: process.Router implements it, beside the
// rules it routes by (fastpath/process/split.go); the pipeline does not import process.
type Router interface {
	// Split groups the entries of req (of signal sig, in layout, holding items items) by
	// the destinations among cand (bit i: destination i; those of the request's tenant that
	// take sig) that take each, into p. An error refuses the whole request. Safe for
	// concurrent use; req is only read during the call.
	Split(p *Pieces, sig fastpath.Signal, req []byte, items int, layout fastpath.Layout, cand uint64) error
	// Filter keeps, in place, the entries of rec (v1 entries of signal sig, holding items
	// items, as the spool's admission recorded them) that destination dest takes among
	// cand, and returns them with their items. Safe for concurrent use; rec is overwritten.
	Filter(sig fastpath.Signal, rec []byte, items, dest int, cand uint64) ([]byte, int, error)
	// All is every destination the router numbers.
	All() uint64
}

// MaxPieces bounds the distinct routes of one request: a request whose entries go to more
// distinct sets of destinations is refused (ErrRoutes).
const MaxPieces = 64

// ErrRoutes refuses a request whose entries go to more than 64 distinct sets of
// destinations.
var ErrRoutes = errors.New("fastpath: a request's resources go to more than 64 distinct sets of destinations (match=resource)")

var (
	routeSplit = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_route_split_requests_total",
		Help: "Admitted requests whose resources went to more than one set of destinations (match=resource), each split into one piece per set.",
	}, []string{"signal"})
	routePieces = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_route_pieces_total",
		Help: "Pieces the requests counted in otlpgate_route_split_requests_total were split into.",
	}, []string{"signal"})
	routeUnroutedResources = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_route_unrouted_resources_total",
		Help: "Resource entries no destination takes (every destination has a match=resource, none matches), left out of their requests (the client was answered Success).",
	}, []string{"signal"})
	routeUnroutedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_route_unrouted_items_total",
		Help: "Spans, data points and log records of the entries counted in otlpgate_route_unrouted_resources_total.",
	}, []string{"signal"})

	routeSplitC, routePiecesC       = bySignal(routeSplit), bySignal(routePieces)
	routeUnroutedResC, routeUnrItsC = bySignal(routeUnroutedResources), bySignal(routeUnroutedItems)
)

// Piece is one route's entries of a split request.
type Piece struct {
	Route      uint64 // the destinations that take it
	Start, End int    // its bytes in Pieces.Buf, v1 entries
	Items      int
}

// Pieces is a request's entries grouped by route: the Router's Split fills it, admission
// enqueues each piece into the open batch of its route. Made (NewPieces) and released by Prepare.
//
// Invariants:
//  1. One: every entry that some destination takes goes to P[0].Route, and none is left out:
//     the request as prepared is the piece, and Buf is nil.
//  2. otherwise Buf holds the pieces one after another, P[i] at Buf[P[i].Start:P[i].End],
//     for i below N; N is 0 when no destination takes any entry.
type Pieces struct {
	One      bool
	N        int
	P        [MaxPieces]Piece
	Buf      []byte            // from Grow; valid until the request is released
	Stripped fastpath.Stripped // top-level fields left out, when the request was split
	Unrouted int               // entries no destination takes
	Lost     int               // their items
	out      charged           // Buf, charged to the request's budget
}

var pieces = sync.Pool{New: func() any { return new(Pieces) }}

// NewPieces returns empty Pieces, pooled, whose buffer Grow charges to budget (nil: to none).
// Release gives them back.
func NewPieces(budget Budget) *Pieces {
	p := pieces.Get().(*Pieces)
	p.out.b = budget
	return p
}

// Release returns p and its buffer to their pools: neither may be used after it.
func (p *Pieces) Release() {
	p.out.release()
	*p = Pieces{}
	pieces.Put(p)
}

// Grow makes Buf n bytes long, for the pieces, and returns it: charged to the request's budget
// beyond what the request's own size accounts for (budget.go), ErrBudget when the budget has
// no room. Called once, by Split.
func (p *Pieces) Grow(n int) ([]byte, error) {
	// The pieces are no larger than the request, which passed the queue's bound, and whose
	// intake holds its bytes: a copy of that size is not charged again (see charged).
	p.out = charged{b: p.out.b, max: n, free: pool.Cap(n)}
	if err := p.out.get(n); err != nil {
		return nil, err
	}
	*p.out.buf = (*p.out.buf)[:n]
	p.Buf = *p.out.buf
	return p.Buf, nil
}

// CountUnrouted counts resources entries holding items items that no destination takes, in
// otlpgate_route_unrouted_*: the Router's Filter, for a record spooled under other routes.
func CountUnrouted(sig fastpath.Signal, resources, items int) {
	if resources > 0 && sig < fastpath.NumSignals {
		routeUnroutedResC[sig].Add(float64(resources))
		routeUnrItsC[sig].Add(float64(items))
	}
}

// takes reports whether destination i of the batch's set takes it: those of its route (which
// only names destinations of its tenant), else those of its tenant.
func (b *Batch) takes(i int) bool {
	if !b.set.sigs[i].Has(b.Signal) {
		return false
	}
	if b.route != 0 {
		return i < 64 && b.route&(1<<i) != 0
	}
	return b.Tenant == nil || b.Tenant.TakesIn(b.set.routes, i)
}

// commit counts what routing did to an admitted (or wholly unrouted) request.
func (p *Pieces) commit(sig fastpath.Signal) {
	if p.N > 1 {
		routeSplitC[sig].Inc()
		routePiecesC[sig].Add(float64(p.N))
	}
	CountUnrouted(sig, p.Unrouted, p.Lost)
}

// AppendEntries appends the request's resource entries to dst as v1 entries, as the spool's
// admission records them: with Config.Router only those some destination takes, the pieces
// one after another; otherwise every entry, as AppendEntries copies them. It returns what it
// stripped, for Admitted.
func (r *Prepared) AppendEntries(dst []byte) ([]byte, fastpath.Stripped, error) {
	if s := r.route; s != nil && !s.One {
		return append(dst, s.Buf...), s.Stripped, nil
	}
	out, _, st, err := fastpath.AppendEntries(dst, r.Req, r.Layout)
	return out, st, err
}

// Entries returns the request itself when it is already what AppendEntries would make of it:
// a v1 request whose top level holds resource entries alone, with no route splitting it. The
// spool's admission then records it without copying it first. ok is false otherwise: call
// AppendEntries.
func (r *Prepared) Entries() (entries []byte, ok bool) {
	if r.Layout != fastpath.LayoutV1 || (r.route != nil && !r.route.One) || !onlyEntries(r.Req) {
		return nil, false
	}
	return r.Req, true
}

// enqueueRoutes is enqueue for a request with routes: each piece joins the open batch of its
// tenant and route. The budget is charged for the whole request first and the pieces are
// appended under the signal's lock, so the request is admitted whole or not at all.
func (p *Pipeline) enqueueRoutes(r *Prepared) error {
	sig, t, s := r.Sig, r.Tenant, r.route
	n := int64(len(r.Req))
	if !p.charge(n) {
		r.Refused(RefusedQueueFull)
		return ErrFull
	}
	var sealed [2 * MaxPieces]*Batch
	ns := 0
	var st fastpath.Stripped
	added := 0
	ss := &p.sig[sig]
	ss.mu.Lock()
	if ss.mu.closed {
		ss.mu.Unlock()
		p.queued.Add(-n)
		return ErrClosed
	}
	set := p.dests.Load()
	if set.res != r.rs {
		// Split by the router of another set than the one in force: its pieces are numbered
		// for that set's destinations, and must not join this set's batches.
		ss.mu.Unlock()
		p.queued.Add(-n)
		return errRoutesChanged
	}
	for j := range s.N {
		pc := &s.P[j]
		size := pc.End - pc.Start
		if s.One {
			size = len(r.Req)
		}
		b := ss.mu.open.getRoute(t, pc.Route)
		if b != nil && (b.set != set || !p.rule.Fits(b.Payload.Len()+size, b.Items)) {
			sealed[ns], b = b, nil
			ns++
			p.takeOpenLocked(sig, sealed[ns-1])
		}
		if b == nil {
			b = getBatch(p, sig, p.initialSize(sig, t, size))
			b.Tenant, b.route = t, pc.Route
			b.born = time.Now().UnixNano()
			b.set = set
			set.users.Add(1)
			ss.mu.open.put(b)
			p.openedLocked(sig, b)
		}
		buf := b.Payload.Buf()
		if cap(*buf)-len(*buf) < size {
			grow(buf, len(*buf)+size, p.cfg.BatchMaxBytes)
		}
		before := len(*buf)
		if s.One {
			// Checked by the Router's Split, which walked the same bytes: it cannot fail.
			*buf, _, st, _ = fastpath.AppendEntries(*buf, r.Req, r.Layout)
			b.Items += r.Items
		} else {
			*buf = append(*buf, s.Buf[pc.Start:pc.End]...)
			b.Items += pc.Items
		}
		added += len(*buf) - before
		if full := p.fullLocked(sig, b, len(*buf)); full != nil {
			sealed[ns] = full
			ns++
		}
	}
	ss.mu.Unlock()
	if int64(added) != n {
		p.queued.Add(int64(added) - n)
	}
	if !s.One {
		st = s.Stripped
	}
	r.Admitted(st)
	for _, b := range sealed[:ns] {
		p.seal(b)
	}
	return nil
}
