package tenant

import (
	"testing"
	"time"
)

// A tenant's bucket: a burst at once, then the rate; a refusal says how long until the
// request fits and takes nothing; a request larger than the burst passes on a full bucket and
// leaves a debt; a refund gives back; another tenant's bucket is its own.
func TestTenantBucket(t *testing.T) {
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: Rate{PerSecond: 1000, Burst: 2000}})
	a, b := mustLookup(t, ts, "a"), mustLookup(t, ts, "b")
	now := nanotime()
	a.bucket.last, b.bucket.last = now, now
	take := func(tn *Tenant, n int, at time.Duration) (time.Duration, bool) {
		return tn.takeAt(n, 1, now+int64(at))
	}
	if _, ok := take(a, 1500, 0); !ok {
		t.Fatal("within the burst: refused")
	}
	d, ok := take(a, 1000, 0)
	if ok || d != 500*time.Millisecond {
		t.Fatalf("500 tokens short at 1000/s: %v %v, want a refusal for 500ms", d, ok)
	}
	if a.Throttled() != 1 {
		t.Fatalf("throttled %d", a.Throttled())
	}
	if _, ok := take(b, 2000, 0); !ok {
		t.Fatal("another tenant was refused for the first one's rate")
	}
	if _, ok := take(a, 1000, 500*time.Millisecond); !ok {
		t.Fatal("refused once the wait it was told had passed")
	}
	// Larger than the burst: admitted on a full bucket, then a debt of 3000 tokens.
	if _, ok := take(a, 5000, 10*time.Second); !ok {
		t.Fatal("a request larger than the burst was refused on a full bucket")
	}
	if d, ok := take(a, 1, 10*time.Second); ok || d != 3001*time.Millisecond {
		t.Fatalf("after the debt: %v %v, want 3.001s", d, ok)
	}
	a.Refund(5000, 1)
	if _, ok := take(a, 1500, 10*time.Second); !ok {
		t.Fatal("refunded tokens were not given back")
	}

	items := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: Rate{PerSecond: 10, Burst: 10, Items: true}})
	c := mustLookup(t, items, "c")
	c.bucket.last = now
	if _, ok := c.takeAt(1<<20, 10, now); !ok {
		t.Fatal("items: 10 items of a burst of 10 refused")
	}
	if d, ok := c.takeAt(1, 1, now); ok || d != 100*time.Millisecond {
		t.Fatalf("items: %v %v, want 100ms", d, ok)
	}

	off := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	if _, ok := mustLookup(t, off, "d").Take(1<<30, 1<<20); !ok {
		t.Fatal("refused without a rate")
	}
}

// SetRate replaces the rate in force: a tenant's bucket keeps its tokens and fills at the new
// rate up to the new burst; turned off, nothing is refused; turned on from off, tenants are
// limited; a bad rate is refused and the one in force stays.
func TestTenantSetRate(t *testing.T) {
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: Rate{PerSecond: 1000, Burst: 2000}})
	a := mustLookup(t, ts, "a")
	now := nanotime()
	a.bucket.last = now
	if _, ok := a.takeAt(2000, 1, now); !ok {
		t.Fatal("within the burst: refused")
	}
	if err := ts.SetRate(Rate{PerSecond: 10, Burst: 100}); err != nil {
		t.Fatal(err)
	}
	// Empty at the change: 50 tokens take 5s at 10/s, not 50ms at 1000/s.
	if d, ok := a.takeAt(50, 1, now); ok || d != 5*time.Second {
		t.Fatalf("at the new rate: %v %v, want a refusal for 5s", d, ok)
	}
	// A minute later the bucket holds the new burst, 100, not the old one.
	if _, ok := a.takeAt(100, 1, now+int64(time.Minute)); !ok {
		t.Fatal("the new burst refused on a full bucket")
	}
	if err := ts.SetRate(Rate{PerSecond: -1}); err == nil || ts.Rate() != (Rate{PerSecond: 10, Burst: 100}) {
		t.Errorf("a negative rate: %v, in force %+v", err, ts.Rate())
	}
	if err := ts.SetRate(Rate{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Take(1<<30, 1<<20); !ok {
		t.Fatal("refused with the rate turned off")
	}

	off := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	b := mustLookup(t, off, "b")
	if err := off.SetRate(Rate{PerSecond: 1, Burst: 1, Items: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Take(1, 1); !ok {
		t.Fatal("the first item of a full bucket refused")
	}
	if d, ok := b.Take(1, 1); ok || d <= 0 {
		t.Fatalf("a second item at 1/s right after: %v %v, want a refusal", d, ok)
	}
}
