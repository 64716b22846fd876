package tenant

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func lookupFrom(ts *Table, peer netip.Addr, vals ...string) (*Tenant, error) {
	var k Key
	for _, v := range vals {
		ts.AddString(&k, v)
	}
	return ts.LookupFrom(&k, peer)
}

// One client sending a new tenant value per request takes no more than its share of the
// table: with the default bounds, 2,000 values from one address leave room for a newcomer from
// another, whose first request is served; the sprayer's refusals are counted, and it is still
// served with the values it already holds and with values others brought.
func TestTenantsPerPeerSpray(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Headers = []string{"x-scope-orgid"}
	ts := newTenants(t, cfg)
	sprayer, newcomer := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	before := testutil.ToFloat64(tenantRefusedPeer)
	served := 0
	for i := range 2000 {
		_, err := lookupFrom(ts, sprayer, fmt.Sprint("spray-", i))
		switch {
		case err == nil:
			served++
		case !errors.Is(err, ErrPeer):
			t.Fatalf("spray %d: %v, want ErrPeer", i, err)
		}
	}
	if served != cfg.MaxPerPeer || ts.PeerTenants(sprayer) != cfg.MaxPerPeer {
		t.Fatalf("sprayer served %d new values and holds %d, want %d", served, ts.PeerTenants(sprayer), cfg.MaxPerPeer)
	}
	if got := testutil.ToFloat64(tenantRefusedPeer) - before; got != float64(2000-cfg.MaxPerPeer) {
		t.Fatalf("per_peer refusals counted %v, want %d", got, 2000-cfg.MaxPerPeer)
	}
	acme, err := lookupFrom(ts, newcomer, "acme")
	if err != nil {
		t.Fatalf("the newcomer's tenant: %v", err)
	}
	// Known tenants are served to anyone, the sprayer included.
	if got, err := lookupFrom(ts, sprayer, "acme"); err != nil || got != acme {
		t.Fatalf("the sprayer sending a known tenant: %v, %v", got, err)
	}
	if _, err := lookupFrom(ts, sprayer, "spray-7"); err != nil {
		t.Fatalf("the sprayer's own tenant: %v", err)
	}
	if ts.PeerTenants(newcomer) != 1 || ts.Len() != 2+cfg.MaxPerPeer {
		t.Fatalf("newcomer holds %d, table %d", ts.PeerTenants(newcomer), ts.Len())
	}
}

// Addresses are peers as a host holds them: an IPv6 host is its /64, an IPv4-mapped address is
// its IPv4 one, and a client without an address (a unix socket) is not bounded; the bound
// counts only what is in the table, so a peer's idle tenants leaving give it room again.
func TestTenantsPerPeerAddresses(t *testing.T) {
	ts, clock := idleTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 100, MaxPerPeer: 2})
	f := func(peer string, val string, want error) {
		t.Helper()
		var p netip.Addr
		if peer != "" {
			p = netip.MustParseAddr(peer)
		}
		if _, err := lookupFrom(ts, p, val); !errors.Is(err, want) {
			t.Fatalf("%s from %q: %v, want %v", val, peer, err, want)
		}
	}
	f("2001:db8::1", "v6-a", nil)
	f("2001:db8::2:3", "v6-b", nil)
	f("2001:db8::ffff", "v6-c", ErrPeer) // the same /64
	f("2001:db8:0:1::1", "v6-c", nil)    // the next /64
	f("192.0.2.1", "v4-a", nil)
	f("::ffff:192.0.2.1", "v4-b", nil)
	f("192.0.2.1", "v4-c", ErrPeer)
	for i := range 10 {
		f("", fmt.Sprint("local-", i), nil)
		f("0.0.0.0", fmt.Sprint("any-", i), nil)
	}
	clock.Add(int64(testIdle) + 1)
	f("192.0.2.1", "v4-c", nil) // v4-a and v4-b went idle
	if n := ts.PeerTenants(netip.MustParseAddr("192.0.2.1")); n != 1 {
		t.Fatalf("192.0.2.1 holds %d after its tenants left, want 1", n)
	}
	// A value the peer brought that left comes back charged again.
	f("192.0.2.1", "v4-a", nil)
	f("192.0.2.1", "v4-b", ErrPeer)
}

func TestTenantsConfigValidatePerPeer(t *testing.T) {
	c := Config{Headers: []string{"x-scope-orgid"}, Max: 10, MaxPerPeer: -1}
	if err := c.Validate(); err == nil {
		t.Fatal("a negative -intake.max-tenants-per-peer validated")
	}
	c.MaxPerPeer = 0 // no bound
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
