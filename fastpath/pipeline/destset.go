package pipeline

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

var destRefused = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "otlpgate_fastpath_destination_refused_batches_total",
	Help: "Sealed batches a destination refused at hand-over (reason queue_full: its queue was full; closed: it was shutting down).",
}, []string{"destination", "reason"})

// ErrTenantRoutes is SetDestinations' refusal on a pipeline with tenant or resource routes:
// the routes number destinations by position, so a changed set needs routes of its own
// (SetDestinationsRoutes), or it would route data to the wrong ones.
var ErrTenantRoutes = errors.New("fastpath: destinations cannot change while tenant or resource routes are set")

// destSet is the destinations a batch is handed to, with their refusal counters. A batch
// takes the pipeline's current set when it opens and keeps it until it was handed out, so that
// every request goes to the destinations that were configured when it was admitted, whatever
// SetDestinations does meanwhile.
type destSet struct {
	dests            []Destination
	sigs             []fastpath.SignalSet // what each destination takes
	refFull, refShut []prometheus.Counter // otlpgate_fastpath_destination_refused_batches_total
	// users counts the batches opened with this set that have not yet been handed to every
	// destination of it: SetDestinations waits for it to reach zero.
	users atomic.Int64
	// Encodings: what each destination sends a pass-through batch's bytes in.
	Encodings
	// res is the router of the destinations' match=resource, as Config.Routing holds it (nil:
	// none): a request split by another router than the set's joins none of its batches.
	res *routeSet
}

func newDestSet(dests []Destination, routes *tenant.Routes, res *routeSet) *destSet {
	s := &destSet{dests: dests, Encodings: EncodingsOf(dests), res: res}
	s.routes, s.own = routes, true
	for _, d := range dests {
		s.refFull = append(s.refFull, destRefused.WithLabelValues(d.Name(), "queue_full"))
		s.refShut = append(s.refShut, destRefused.WithLabelValues(d.Name(), "closed"))
		s.sigs = append(s.sigs, SignalsOf(d))
	}
	return s
}

// Encodings is what each destination of a set sends a pass-through batch's bytes in
// (WireEncoder), by position. The zero value is a set that sends none.
type Encodings struct {
	// all is the encoding every destination sends, EncodingNone when they do not all send
	// the same one; each is each destination's.
	all  Encoding
	each []Encoding
	// routes is the tenant routes of the set when own is set (a pipeline's set: SetDestinationsRoutes
	// changes them with the destinations), else the tenant table's current ones.
	routes *tenant.Routes
	own    bool
}

// EncodingsOf reads what each of dests sends a pass-through batch in.
func EncodingsOf(dests []Destination) Encodings {
	var s Encodings
	for i, d := range dests {
		var e Encoding
		if w, ok := d.(WireEncoder); ok {
			e = w.PassThrough()
		}
		s.each = append(s.each, e)
		switch {
		case i == 0:
			s.all = e
		case e != s.all:
			s.all = EncodingNone
		}
	}
	return s
}

// Of is the encoding every destination that takes t's batches sends a pass-through batch
// in, EncodingNone when they do not all send the same one. Without tenant routes every
// destination takes every tenant; with them the set never changes (SetDestinations refuses),
// and a tenant's pass-through batches need only the destinations of its match-header.
func (s Encodings) Of(t *tenant.Tenant) Encoding {
	if t == nil {
		return s.all
	}
	rt := s.routes
	if !s.own {
		rt = t.CurrentRoutes()
	}
	if rt == nil {
		return s.all
	}
	e, seen := EncodingNone, false
	for i, d := range s.each {
		switch {
		case !t.TakesIn(rt, i):
		case !seen:
			e, seen = d, true
		case d != e:
			return EncodingNone
		}
	}
	return e
}

// refused counts destination i's refusal of a batch at hand-over.
func (s *destSet) refused(i int, err error) {
	if errors.Is(err, ErrClosed) {
		s.refShut[i].Inc()
		return
	}
	s.refFull[i].Inc()
}

// SetDestinations makes dests the destinations of every request admitted from now on. A request
// goes to the destinations that were set when it was admitted: an open batch holding requests
// admitted before the call is sealed (by the call, or by the next request of its signal) and
// handed to the previous set. SetDestinations returns once no batch can be handed to the
// previous set any more, so that the caller may then shut down the destinations dests leaves
// out (each finishes, as usual, every batch it took). Calls are serialized; a closed pipeline
// takes none, and a pipeline with tenant routes (tenant.Config.Routes) or resource routes
// (Config.Router) refuses with ErrTenantRoutes. Safe for concurrent use.
func (p *Pipeline) SetDestinations(dests []Destination) error {
	if ts := p.cfg.Tenants; ts != nil && ts.Routes() != nil || p.cfg.Routing.Router() != nil {
		// Routes number the destinations by position: a new set needs routes of its own.
		return ErrTenantRoutes
	}
	return p.setDestinations(dests, nil, nil)
}

// Routes is how a set of destinations divides the data among them, each by position in the
// set: Tenants is each destination's match-header (none: every destination takes every
// tenant), Resources the router of their match=resource (nil: every destination takes every
// resource entry of the tenants it takes).
type Routes struct {
	Tenants   []tenant.Match
	Resources Router
}

// SetDestinationsRoutes is SetDestinations for destinations with routes, given in the order
// of dests. The set and its routes are swapped together: a batch goes by the routes of the
// set it was opened with, so that a destination that stays keeps its tenants and its resources
// whatever position it moves to; a request split by the routes of one set never joins a batch
// of another (it is split again), and a tenant's Lookup and Routed go by the new routes from
// the call on.
func (p *Pipeline) SetDestinationsRoutes(dests []Destination, routes Routes) error {
	if len(routes.Tenants) != 0 {
		if p.cfg.Tenants == nil {
			return errors.New("fastpath: tenant routes without tenants")
		}
		if len(routes.Tenants) != len(dests) {
			return fmt.Errorf("fastpath: %d tenant routes for %d destinations", len(routes.Tenants), len(dests))
		}
		if err := p.cfg.Tenants.CheckRoutes(routes.Tenants); err != nil {
			return err
		}
	}
	if r := routes.Resources; r != nil {
		if bits.Len64(r.All()) != len(dests) {
			return fmt.Errorf("fastpath: resource routes for %d destinations, %d given", bits.Len64(r.All()), len(dests))
		}
		if p.cfg.Ack == AckUpstream {
			return errors.New("fastpath: -ack=upstream cannot be combined with match=resource: a split request has no single batch to wait on")
		}
	}
	return p.setDestinations(dests, tenant.NewRoutes(routes.Tenants), routes.Resources)
}

func (p *Pipeline) setDestinations(dests []Destination, routes *tenant.Routes, rt Router) error {
	if len(dests) == 0 {
		return errors.New("fastpath: no destination")
	}
	p.setMu.Lock()
	defer p.setMu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	if ts := p.cfg.Tenants; ts != nil {
		// Before the set: a tenant admitted from now on is checked against the new routes; one
		// joining an open batch of the old set is handed out by the old set's routes.
		ts.StoreRoutes(routes)
	}
	// The router first, then the set: a request split by the old router after the swap of
	// the set is refused at enqueue (errRoutesChanged) and split again by the new one; the
	// pipeline need not wait for the requests split by the old router (Routing.Set).
	res := newRouteSet(rt, routes, dests)
	p.cfg.Routing.swap(res)
	old := p.dests.Swap(newDestSet(dests, routes, res))
	p.cfg.Served.Set(dests)
	// Admission compares an open batch's set with the current one under the signal's lock, so
	// once Flush has taken every signal's lock no batch of the old set is open: what is left
	// are seals handing batches out right now, outside the lock, each a few microseconds
	// (Enqueue does not block).
	p.Flush()
	for i := 1; old.users.Load() != 0; i++ {
		time.Sleep(50 * time.Microsecond)
		if i%20 == 0 {
			// With tenants a signal holds a batch per tenant, and a Flush racing new requests
			// may have sealed batches of the new set in place of old ones: seal again.
			p.Flush()
		}
	}
	return nil
}

var unservedBatches = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_fastpath_unserved_batches_total",
	Help: "Sealed batches of a signal no destination of their set takes, given up at hand-over: requests admitted while a reload replaced the destinations by ones without their signal (-dest signals=).",
})
