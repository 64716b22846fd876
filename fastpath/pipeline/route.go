package pipeline

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/encoding/protowire"

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
// feeder keeps, from each record, the entries its destination takes (FilterRoute).
//
// An entry no destination takes (every destination has a rule, and none of the rules matches
// it) is left out and counted (otlpgate_route_unrouted_*): routes without a destination that
// takes the rest filter, as -drop does. A request left with no entry is answered Success.

// Router decides which destinations take a resource entry. process.Router implements it;
// fastpath does not import process/.
type Router interface {
	// Route returns the destinations that take the resource entry whose value is entry, as
	// bits (bit i: destination i), among cand (the destinations of the request's tenant); 0
	// when none does. An error refuses the whole request. Safe for concurrent use.
	Route(sig fastpath.Signal, entry []byte, cand uint64) (uint64, error)
	// Items counts the items (spans, data points, log records) of the entry.
	Items(sig fastpath.Signal, entry []byte) (int, error)
	// All is every destination the router numbers.
	All() uint64
}

// maxPieces bounds the distinct routes of one request: a request whose entries go to more
// distinct sets of destinations is refused (ErrRoutes).
const maxPieces = 64

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

// piece is one route's entries of a split request.
type piece struct {
	route      uint64 // the destinations that take it
	start, end int    // its bytes in the split's buffer, v1 entries
	items      int
}

// routeSplit is a request's entries grouped by route.
//
// Invariants:
//  1. one: every entry that some destination takes goes to pieces[0].route, and none is left
//     out: the request as prepared is the piece, and buf is nil.
//  2. otherwise buf holds the pieces one after another, pieces[i] at buf[start:end].
type routeSplitter struct {
	one      bool
	n        int
	pieces   [maxPieces]piece
	out      charged           // the pieces, charged to the request's budget
	buf      *[]byte           // out.buf once split
	st       fastpath.Stripped // top-level fields left out, when the request was split
	unrouted int               // entries no destination takes
	lost     int               // their items
}

var routeSplitters = sync.Pool{New: func() any { return new(routeSplitter) }}

func (s *routeSplitter) release() {
	s.out.release()
	*s = routeSplitter{}
	routeSplitters.Put(s)
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

// splitRoutes groups the entries of req (in layout, holding items items) by route, among
// tenants, the destinations that take the request's tenant, and served, those that take sig. It walks the top level twice: once to route each entry (the piece of each is kept in
// a pooled scratch buffer, a byte an entry), and, when the entries do not all go one way, once
// more to copy them into their pieces. Counting items walks each entry down to its items: the
// largest piece is not walked, it holds what the others do not. It allocates nothing once the
// pools are warm.
func splitRoutes(rt Router, budget Budget, tenants, served uint64, sig fastpath.Signal, req []byte, items int, layout fastpath.Layout) (*routeSplitter, error) {
	if layout >= fastpath.NumLayouts {
		return nil, fastpath.ErrLayout
	}
	s := routeSplitters.Get().(*routeSplitter)
	cand := tenants & rt.All() & served // a destination that does not take sig is no candidate
	const unrouted = 0xff
	scratch := pool.GetBytes(len(req)/2 + 1) // an entry takes two bytes at least
	defer pool.PutBytes(scratch)
	marks := *scratch
	var sizes [maxPieces]int
	fail := func(err error) (*routeSplitter, error) {
		*scratch = marks[:0]
		s.release()
		return nil, err
	}
	it := fastpath.NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		switch {
		case layout == fastpath.LayoutV1 && f.Num == 1, layout == fastpath.LayoutOTEP && f.Num == 2:
			if f.Type != protowire.BytesType {
				return fail(fastpath.ErrWireType)
			}
			entry := req[f.Value:f.End]
			route, err := rt.Route(sig, entry, cand)
			if err != nil {
				return fail(err)
			}
			if route == 0 {
				n, err := rt.Items(sig, entry)
				if err != nil {
					return fail(err)
				}
				s.unrouted++
				s.lost += n
				marks = append(marks, unrouted)
				continue
			}
			j := 0
			for j < s.n && s.pieces[j].route != route {
				j++
			}
			if j == s.n {
				if s.n == maxPieces {
					return fail(ErrRoutes)
				}
				s.pieces[j] = piece{route: route}
				s.n++
			}
			sizes[j] += 1 + f.End - f.After // the v1 tag, the length as it came, the entry
			marks = append(marks, byte(j))
		case layout == fastpath.LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				return fail(fastpath.ErrWireType)
			}
		default:
			s.st.Fields++
			s.st.Bytes += f.End - f.Tag
		}
	}
	*scratch = marks
	if err := it.Err(); err != nil {
		return fail(err)
	}
	if s.n <= 1 && s.unrouted == 0 {
		s.one, s.st = true, fastpath.Stripped{} // AppendEntries strips and counts as it copies
		return s, nil
	}
	if s.n == 0 {
		return s, nil // nothing is taken
	}
	total, big := 0, 0
	for j := range s.n {
		s.pieces[j].start, s.pieces[j].end = total, total
		total += sizes[j]
		if sizes[j] > sizes[big] {
			big = j
		}
	}
	// The pieces are no larger than the request, which passed the queue's bound, and whose
	// intake holds its bytes: a copy of that size is not charged again (see charged).
	s.out = charged{b: budget, max: total, free: pool.Cap(total)}
	if err := s.out.get(total); err != nil {
		return fail(err)
	}
	s.buf = s.out.buf
	out := (*s.buf)[:total]
	it, k := fastpath.NewTopLevel(req), 0
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if !(layout == fastpath.LayoutV1 && f.Num == 1 || layout == fastpath.LayoutOTEP && f.Num == 2) {
			continue
		}
		j := marks[k]
		k++
		if j == unrouted {
			continue
		}
		pc := &s.pieces[j]
		out[pc.end] = fastpath.TagV1Entry
		pc.end += 1 + copy(out[pc.end+1:], req[f.After:f.End])
		if int(j) == big {
			continue
		}
		n, err := rt.Items(sig, req[f.Value:f.End])
		if err != nil {
			return fail(err)
		}
		pc.items += n
		items -= n
	}
	*s.buf = out
	s.pieces[big].items = max(items-s.lost, 0)
	return s, nil
}

// commit counts what routing did to an admitted (or wholly unrouted) request.
func (s *routeSplitter) commit(sig fastpath.Signal) {
	if s.n > 1 {
		routeSplitC[sig].Inc()
		routePiecesC[sig].Add(float64(s.n))
	}
	if s.unrouted > 0 {
		routeUnroutedResC[sig].Add(float64(s.unrouted))
		routeUnrItsC[sig].Add(float64(s.lost))
	}
}

// AppendEntries appends the request's resource entries to dst as v1 entries, as the spool's
// admission records them: with Config.Router only those some destination takes, the pieces
// one after another; otherwise every entry, as AppendEntries copies them. It returns what it
// stripped, for Admitted.
func (r *Prepared) AppendEntries(dst []byte) ([]byte, fastpath.Stripped, error) {
	if s := r.route; s != nil && !s.one {
		return append(dst, (*s.buf)...), s.st, nil
	}
	out, _, st, err := fastpath.AppendEntries(dst, r.Req, r.Layout)
	return out, st, err
}

// Entries returns the request itself when it is already what AppendEntries would make of it:
// a v1 request whose top level holds resource entries alone, with no route splitting it. The
// spool's admission then records it without copying it first. ok is false otherwise: call
// AppendEntries.
func (r *Prepared) Entries() (entries []byte, ok bool) {
	if r.Layout != fastpath.LayoutV1 || (r.route != nil && !r.route.one) || !onlyEntries(r.Req) {
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
	var sealed [2 * maxPieces]*Batch
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
	for j := range s.n {
		pc := &s.pieces[j]
		size := pc.end - pc.start
		if s.one {
			size = len(r.Req)
		}
		b := ss.mu.open.getRoute(t, pc.route)
		if b != nil && (b.set != set || !p.rule.Fits(b.Payload.Len()+size, b.Items)) {
			sealed[ns], b = b, nil
			ns++
			p.takeOpenLocked(sig, sealed[ns-1])
		}
		if b == nil {
			b = getBatch(p, sig, p.initialSize(sig, t, size))
			b.Tenant, b.route = t, pc.route
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
		if s.one {
			// Checked by splitRoutes' walk of the same bytes: it cannot fail.
			*buf, _, st, _ = fastpath.AppendEntries(*buf, r.Req, r.Layout)
			b.Items += r.Items
		} else {
			*buf = append(*buf, (*s.buf)[pc.start:pc.end]...)
			b.Items += pc.items
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
	if !s.one {
		st = s.st
	}
	r.Admitted(st)
	for _, b := range sealed[:ns] {
		p.seal(b)
	}
	return nil
}

// FilterRoute keeps, in place, the entries of rec (v1 resource entries of signal sig, as the
// spool's admission recorded them) that destination dest of rt's set takes, among tenants,
// the destinations of that set that take the record's tenant, and returns them with the items
// they hold: items, the record's, when it keeps every entry. The feeder of destination 0
// counts the entries no destination takes (a restart with other routes than the ones the
// record was admitted with) in otlpgate_route_unrouted_*. rec is overwritten.
func FilterRoute(rt Router, tenants uint64, sig fastpath.Signal, dest int, rec []byte, items int) ([]byte, int, error) {
	if sig >= fastpath.NumSignals {
		return nil, 0, fastpath.ErrSignal
	}
	cand := tenants & rt.All()
	w, kept, all := 0, 0, true
	unrouted, lost := 0, 0
	it := fastpath.NewTopLevel(rec)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num != 1 || f.Type != protowire.BytesType {
			return nil, 0, fastpath.ErrWireType // admission wrote only entries
		}
		entry := rec[f.Value:f.End]
		route, err := rt.Route(sig, entry, cand)
		if err != nil {
			return nil, 0, err
		}
		if route&(1<<dest) == 0 {
			all = false
			if route == 0 && dest == 0 {
				n, _ := rt.Items(sig, entry)
				unrouted++
				lost += n
			}
			continue
		}
		n, err := rt.Items(sig, entry)
		if err != nil {
			return nil, 0, err
		}
		kept += n
		// The walker has read past this field: moving it down overwrites nothing unread.
		w += copy(rec[w:], rec[f.Tag:f.End])
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	if unrouted > 0 {
		routeUnroutedResC[sig].Add(float64(unrouted))
		routeUnrItsC[sig].Add(float64(lost))
	}
	if all {
		return rec, items, nil
	}
	return rec[:w], kept, nil
}
