package tenant

import (
	"fmt"
	"slices"
	"strings"
)

// DestRoute is one destination's place in a set of destinations with tenant routes: the set's
// match-headers and the destination's position among them. A spool feeder decides record by
// record whether its destination takes a record's tenant, long after the record was admitted;
// it holds a DestRoute and is given a new one when a reload changes the set (Feeder.SetRoute),
// the routes and its position together, so that it never reads a new set's routes at its old
// position: a destination keeps its tenants whatever position the reload gave it. The zero
// value has no routes: its destination takes every tenant.
type DestRoute struct {
	rt *Routes
	// Dest is the destination's position in the set.
	Dest int
}

// Takes reports whether r's destination takes t's batches (nil, the default tenant without
// tenants: every destination does).
func (r DestRoute) Takes(t *Tenant) bool { return t == nil || t.TakesIn(r.rt, r.Dest) }

// Routed reports whether any destination of r's set takes t's batches.
func (r DestRoute) Routed(t *Tenant) bool {
	return t == nil || r.rt == nil || t.routesIn(r.rt).routed
}

// RouteOf is destination i of the table's current routes (Config.Routes, or the last
// SetRoutes or SetDestinationsRoutes). Safe for concurrent use.
func (ts *Table) RouteOf(i int) DestRoute { return DestRoute{rt: ts.routes.Load(), Dest: i} }

// SetRoutes makes routes the match-headers of the destinations, in the order of their new set
// (none: every destination takes every tenant), for admission from now on, and returns each
// destination's DestRoute in it: what a spool's admission and feeders, which have no pipeline
// to swap its set with the routes (SetDestinationsRoutes), are given on a reload. Reloads
// are serialized by the caller. Safe for concurrent use with lookups and admission.
func (ts *Table) SetRoutes(routes []Match) ([]DestRoute, error) {
	if err := ts.CheckRoutes(routes); err != nil {
		return nil, err
	}
	rt := NewRoutes(routes)
	ts.routes.Store(rt)
	out := make([]DestRoute, len(routes))
	for i := range out {
		out[i] = DestRoute{rt: rt, Dest: i}
	}
	return out, nil
}

// CheckRoutes refuses a match-header on a header the table does not read. Safe for concurrent
// use.
func (ts *Table) CheckRoutes(routes []Match) error {
	for _, m := range routes {
		if m.Header != "" && !slices.Contains(ts.cfg.Headers, m.Header) {
			return fmt.Errorf("fastpath: match-header %q is not one of -intake.headers (%s)", m.Header, strings.Join(ts.cfg.Headers, ","))
		}
	}
	return nil
}

// RouteMaskIn is RouteMask under the routes rt (nil: none, every destination takes every
// tenant): the destinations of a set of destinations that take t, whatever the table's
// current routes are. Safe for concurrent use.
func (t *Tenant) RouteMaskIn(rt *Routes) uint64 {
	if t == nil || rt == nil {
		return ^uint64(0)
	}
	return t.routesIn(rt).takes[0]
}

// Mask is the destinations of r's set that take t's batches (every one without routes).
func (r DestRoute) Mask(t *Tenant) uint64 { return t.RouteMaskIn(r.rt) }

// Routes is the routes of r's set, nil for none.
func (r DestRoute) Routes() *Routes { return r.rt }
