package tenant

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testIdle = time.Minute

// idleTenants returns a table with -intake.tenant-idle testIdle on a clock the test moves.
func idleTenants(t *testing.T, cfg Config) (*Table, *atomic.Int64) {
	t.Helper()
	cfg.Idle = testIdle
	ts := newTenants(t, cfg)
	clock := &atomic.Int64{}
	clock.Store(int64(time.Hour))
	ts.clock = clock.Load
	return ts, clock
}

// A full table takes a new tenant once another has been idle for -intake.tenant-idle: one
// client's spent values no longer cost every later tenant its data until a restart.
func TestTenantsIdleMakeRoom(t *testing.T) {
	ts, clock := idleTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 3})
	a := mustLookup(t, ts, "a")
	b := mustLookup(t, ts, "b") // with the default: 3
	if _, err := lookup(ts, "c"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a new tuple in a full table of busy tenants: %v, want ErrTooMany", err)
	}
	clock.Add(int64(testIdle) / 2)
	mustLookup(t, ts, "b") // b stays busy
	expired := testutil.ToFloat64(tenantsExpired)
	clock.Add(int64(testIdle)/2 + 1)
	c := mustLookup(t, ts, "c")
	if got := testutil.ToFloat64(tenantsExpired) - expired; got != 1 {
		t.Fatalf("tenants expired: %v, want 1 (a)", got)
	}
	if !a.expired() || b.expired() || c.ID() != a.ID() || ts.Len() != 3 {
		t.Fatalf("a expired %v, b expired %v, c id %d (a's %d), Len %d", a.expired(), b.expired(), c.ID(), a.ID(), ts.Len())
	}
	if g := testutil.ToFloat64(tenantsKnown); g != 3 {
		t.Fatalf("otlpgate_tenants %v, want 3", g)
	}
	// The held *Tenant still reads as before.
	if a.String() != "a" || !slices.Equal(a.Values(), []string{"a"}) || !a.Routed() {
		t.Fatalf("expired a reads %q %q", a.String(), a.Values())
	}
	// a's values coming back are a new tenant, once the table has room.
	if _, err := lookup(ts, "a"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a again in a full table: %v", err)
	}
	clock.Add(int64(testIdle) + 1)
	mustLookup(t, ts, "c")
	a2 := mustLookup(t, ts, "a")
	if a2 == a || a2.String() != "a" || a2.ID() != b.ID() {
		t.Fatalf("a back: same pointer %v, label %q, id %d (b's %d)", a2 == a, a2.String(), a2.ID(), b.ID())
	}
	if got := ts.Sweep(); got != 0 {
		t.Fatalf("Sweep took %d fresh tenants", got)
	}
	clock.Add(int64(testIdle) + 1)
	if got := ts.Sweep(); got != 2 || ts.Len() != 1 || testutil.ToFloat64(tenantsKnown) != 1 {
		t.Fatalf("Sweep of every idle tenant: %d left, Len %d", got, ts.Len())
	}
	if ts.Default().expired() {
		t.Fatal("the default tenant expired")
	}
}
