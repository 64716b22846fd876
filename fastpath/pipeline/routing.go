package pipeline

import (
	"errors"
	"runtime"
	"sync/atomic"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Routing holds the resource router in force (Config.Routing). The router numbers the
// destinations by their position in a set, so it is only right for the set it was made for:
// a reload that changes the destinations replaces the router with them (a Pipeline swaps both
// at once, SetDestinationsRoutes; the spool's admission with the feeders' routes). A request
// is split by the router that was in force when it was prepared, and holds it until Release
// (Prepared): the pipeline enqueues the pieces only into the set of that router, and
// prepares the request again when the set changed meanwhile (errRoutesChanged); the spool's
// admission appends the record before Release, so that once Set returned (Drain) every
// record split by the previous router is in the spool. Safe for concurrent use.
type Routing struct{ cur atomic.Pointer[routeSet] }

// routeSet is one router as a Routing holds it, with the tenant routes and the signals of the
// same set of destinations: a request's candidates are the destinations of that set that take
// its tenant and its signal. nil stands for no router: every destination takes every entry.
type routeSet struct {
	rt      Router
	tenants *tenant.Routes
	served  [fastpath.NumSignals]uint64 // servedBy the set's destinations
	// users counts the prepared requests split by rt that were not released.
	users atomic.Int64
}

// NewRouting returns a Routing holding rt (nil: none), for destinations whose tenant routes
// are tenants and which take every signal until Set says otherwise.
func NewRouting(rt Router, tenants *tenant.Routes) *Routing {
	r := &Routing{}
	r.cur.Store(newRouteSet(rt, tenants, nil))
	return r
}

// newRouteSet is the route set of rt for dests (nil: destinations that take every signal)
// with the tenant routes tenants.
func newRouteSet(rt Router, tenants *tenant.Routes, dests []Destination) *routeSet {
	if rt == nil {
		return nil
	}
	s := &routeSet{rt: rt, tenants: tenants}
	if dests == nil {
		for i := range s.served {
			s.served[i] = ^uint64(0)
		}
		return s
	}
	s.served = servedBy(dests)
	return s
}

// Router returns the router in force, nil for none.
func (r *Routing) Router() Router {
	if s := r.cur.Load(); s != nil {
		return s.rt
	}
	return nil
}

// Set makes rt (nil: none) the router of dests for the requests prepared from now on, with
// tenants, the tenant routes of dests, and returns once no request split by the previous
// router is still held (Prepared.Release). A caller that must not wait (a Pipeline, which
// checks the router again at enqueue) swaps instead.
func (r *Routing) Set(rt Router, tenants *tenant.Routes, dests []Destination) {
	r.swap(newRouteSet(rt, tenants, dests)).drain()
}

// swap makes s the route set in force and returns the previous one.
func (r *Routing) swap(s *routeSet) *routeSet { return r.cur.Swap(s) }

// acquire returns the route set in force, held for a request until release; nil without a
// router, which holds nothing.
func (r *Routing) acquire() *routeSet {
	for {
		s := r.cur.Load()
		if s == nil {
			return nil
		}
		s.users.Add(1)
		// Set swaps, then waits for users: a set it swapped out before this request counted
		// itself is not the one in force any more, and is given back.
		if r.cur.Load() == s {
			return s
		}
		s.users.Add(-1)
	}
}

func (s *routeSet) release() {
	if s != nil {
		s.users.Add(-1)
	}
}

// drain waits until no request holds s: a request holds it from Prepare until its Release,
// which is microseconds (no lock is held, and admission does not block on a destination).
func (s *routeSet) drain() {
	for s != nil && s.users.Load() != 0 {
		runtime.Gosched()
	}
}

// errRoutesChanged is enqueue's refusal of a request split by another router than that of
// the set of destinations in force: it is prepared again, with the router of the set.
var errRoutesChanged = errors.New("fastpath: the resource routes changed")

// router returns the router in force under c: Routing's, else Router.
func (c *Config) router() Router {
	if c.Routing != nil {
		return c.Routing.Router()
	}
	return c.Router
}
