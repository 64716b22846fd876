//go:build !race

package tenant

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// Looking up a known tenant, from header values as an intake reads them or from a spooled
// record, allocates nothing.
func TestTenantLookupZeroAlloc(t *testing.T) {
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	acme := mustLookup(t, ts, "acme", "eu")
	org, region := []byte("acme"), []byte("eu")
	rec := acme.Record()
	allocs := testing.AllocsPerRun(1000, func() {
		var k Key
		ts.Add(&k, org)
		ts.Add(&k, region)
		if got, err := ts.Lookup(&k); err != nil || got != acme {
			t.Fatal(got, err)
		}
		if got, err := ts.FromRecord(rec); err != nil || got != acme {
			t.Fatal(got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("known tenant: %v allocations per lookup, want 0", allocs)
	}
}

// With -intake.tenant-idle, a known tenant's lookup still allocates nothing, with the sweeps
// that come due meanwhile (which take nobody: the tenant is in use, the default stays).
func TestTenantLookupIdleZeroAlloc(t *testing.T) {
	ts, clock := idleTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	acme := mustLookup(t, ts, "acme")
	org := []byte("acme")
	allocs := testing.AllocsPerRun(1000, func() {
		clock.Add(int64(testIdle) / 2) // a sweep is due at each lookup
		var k Key
		ts.Add(&k, org)
		if got, err := ts.Lookup(&k); err != nil || got != acme {
			t.Fatal(got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("known tenant with sweeps: %v allocations per lookup, want 0", allocs)
	}
}

// A new tenant that takes the place of an idle one in a full table allocates no more than a
// new tenant in a table with room: the sweep and the insert share one copy of the index.
func TestTenantNewAfterIdleAllocs(t *testing.T) {
	names := make([][]byte, 1200)
	for i := range names {
		names[i] = fmt.Appendf(nil, "n%05d", i)
	}
	perNew := func(ts *Table, warmed, step func()) float64 {
		for i := range 49 {
			mustLookup(t, ts, fmt.Sprint("warm", i))
		}
		warmed()
		i := 0
		return testing.AllocsPerRun(1000, func() {
			step()
			var k Key
			ts.Add(&k, names[i])
			i++
			if _, err := ts.Lookup(&k); err != nil {
				t.Fatal(err)
			}
		})
	}
	room := perNew(newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 100000}), func() {}, func() {})
	// Each new tenant finds the table full and the oldest idle.
	full, clock := idleTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 50})
	idle := perNew(full, func() { clock.Add(int64(testIdle)) }, func() { clock.Add(int64(testIdle) / 48) })
	if idle > room {
		t.Fatalf("a new tenant after expiry: %v allocations, with room %v", idle, room)
	}
	t.Logf("allocations of a new tenant: %v with room, %v in a full table after expiry", room, idle)
}

// A known tenant from a client address, or bound to a bearer token, costs no allocation
// either.
func TestTenantLookupPeerAndCredentialZeroAlloc(t *testing.T) {
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10, MaxPerPeer: 2})
	peer := netip.MustParseAddr("2001:db8::7")
	org := []byte("acme")
	var k Key
	ts.Add(&k, org)
	acme, err := ts.LookupFrom(&k, peer)
	if err != nil {
		t.Fatal(err)
	}
	bound := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	if err := bound.SetCredentials([]Credential{{Token: strings.Repeat("t", 100), Values: []string{"acme"}}}); err != nil {
		t.Fatal(err)
	}
	auth := "Bearer " + strings.Repeat("t", 100)
	allocs := testing.AllocsPerRun(1000, func() {
		var k Key
		ts.Add(&k, org)
		if got, err := ts.LookupFrom(&k, peer); err != nil || got != acme {
			t.Fatal(got, err)
		}
		var c Key
		bound.AddClaim(&c, org)
		if _, err := bound.LookupCredentialString(auth, &c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("known tenant by peer and by token: %v allocations per lookup, want 0", allocs)
	}
}
