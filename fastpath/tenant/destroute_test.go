package tenant

import (
	"errors"
	"testing"
)

// A DestRoute keeps its set's routes and its position together: after SetRoutes reorders the
// destinations, one made before still answers for the set it was made in, and the new ones
// for the new set; admission goes by the new routes.
func TestSetRoutes(t *testing.T) {
	acmeOnly := Match{Header: "x-scope-orgid", Values: []string{"acme"}}
	betaOnly := Match{Header: "x-scope-orgid", Values: []string{"beta"}}
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: []Match{acmeOnly, betaOnly}})
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	oldB := ts.RouteOf(1)
	if !oldB.Takes(beta) || oldB.Takes(acme) {
		t.Fatalf("before: b takes beta %v, acme %v", oldB.Takes(beta), oldB.Takes(acme))
	}
	if _, err := lookup(ts, "gamma"); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("gamma before: %v, want ErrNoRoute", err)
	}
	// b moves first, a leaves, c takes the rest.
	rs, err := ts.SetRoutes([]Match{betaOnly, {}})
	if err != nil {
		t.Fatal(err)
	}
	gamma := mustLookup(t, ts, "gamma")
	b, c := rs[0], rs[1]
	switch {
	case !b.Takes(beta) || b.Takes(acme) || b.Takes(gamma):
		t.Errorf("b at 0 takes beta %v, acme %v, gamma %v", b.Takes(beta), b.Takes(acme), b.Takes(gamma))
	case c.Takes(beta) || !c.Takes(acme) || !c.Takes(gamma):
		t.Errorf("c at 1 takes beta %v, acme %v, gamma %v", c.Takes(beta), c.Takes(acme), c.Takes(gamma))
	case !oldB.Takes(beta) || oldB.Takes(acme):
		t.Errorf("b's route of the old set changed: beta %v, acme %v", oldB.Takes(beta), oldB.Takes(acme))
	case !b.Routed(gamma) || oldB.Routed(gamma):
		t.Errorf("gamma routed in the new set %v, in the old %v", b.Routed(gamma), oldB.Routed(gamma))
	}
	if _, err := ts.SetRoutes([]Match{{Header: "x-region", Values: []string{"eu"}}}); err == nil {
		t.Error("a match-header on a header the table does not read was taken")
	}
	if rs, err := ts.SetRoutes(nil); err != nil || len(rs) != 0 || !(DestRoute{Dest: 3}).Takes(acme) || !ts.RouteOf(0).Takes(beta) {
		t.Errorf("no routes: %v %v", rs, err)
	}
}
