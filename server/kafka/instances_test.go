package kafka

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// testSet is a subscription set with one subscription on every metric at interval.
func testSet(t testing.TB, gen uint64, interval time.Duration) *subscriptionSet {
	t.Helper()
	cfg := testConfig()
	cfg.DefaultInterval = interval
	cfg.IdleTimeout = max(cfg.IdleTimeout, 2*interval)
	set, err := loadSubscriptions(&cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestNewID(t *testing.T) {
	seen := map[[16]byte]bool{}
	for i := 0; i < 1000; i++ {
		id := newID()
		if reservedID(id) || seen[id] {
			t.Fatalf("id %x reserved or repeated", id)
		}
		seen[id] = true
		s := idString(id)
		if len(s) != 22 || s[0] == '-' {
			t.Fatalf("id prints as %q", s)
		}
		if id[6]>>4 != 4 || id[8]>>6 != 2 {
			t.Fatalf("id %x is not a version 4 uuid", id)
		}
		back, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || [16]byte(back) != id {
			t.Fatalf("id %x does not round-trip through %q", id, s)
		}
	}
	for _, id := range [][16]byte{{}, {15: 1}} {
		if !reservedID(id) {
			t.Errorf("%x not reserved", id)
		}
	}
	for _, id := range [][16]byte{{15: 2}, {0: 1}, {14: 1, 15: 1}} {
		if reservedID(id) {
			t.Errorf("%x reserved", id)
		}
	}
}

func TestRegistryGet(t *testing.T) {
	r := newRegistry(10, 1<<30)
	defer r.clear()
	set := testSet(t, 1, time.Second)
	c := &conn{}
	lbl := &clientLabels{clientID: "x"}
	now := time.Unix(1000, 0)

	a := r.get(c, lbl, [16]byte{}, set, now)
	if reservedID(a.id) || a.plan == nil || a.plan.interval != time.Second {
		t.Fatalf("zero id: %+v", a)
	}
	b := r.get(c, lbl, a.id, set, now)
	if b.id != a.id || b.subID != a.subID || r.len() != 1 {
		t.Fatalf("known id: %+v vs %+v, %d instances", b, a, r.len())
	}
	// A reserved non-zero id is replaced too: it can never be pushed with.
	d := r.get(c, lbl, [16]byte{15: 1}, set, now)
	if reservedID(d.id) || d.id == a.id {
		t.Fatalf("reserved id: %+v", d)
	}
	// An id from before a restart is adopted as is.
	old := newID()
	if e := r.get(c, lbl, old, set, now); e.id != old {
		t.Fatalf("adopted id %x, want %x", e.id, old)
	}
	if other := r.get(c, lbl, newID(), set, now); other.subID == a.subID {
		t.Fatal("two instances share a subscription id")
	}
}

func TestRegistryExpiry(t *testing.T) {
	for _, tc := range []struct {
		interval, ttl time.Duration
	}{
		{time.Second, time.Minute},            // max(60s, 3s)
		{30 * time.Second, 90 * time.Second},  // max(60s, 90s)
		{100 * time.Millisecond, time.Minute}, // the shortest interval
		{20 * time.Minute, time.Hour},         // a long one
		{20*time.Second + time.Millisecond, time.Minute + 3*time.Millisecond},
	} {
		r := newRegistry(10, 1<<30)
		set := testSet(t, 1, tc.interval)
		now := time.Unix(1000, 0)
		a := r.get(&conn{}, &clientLabels{}, [16]byte{}, set, now)
		r.expire(now.Add(tc.ttl))
		if r.len() != 1 {
			t.Fatalf("interval %v: expired at exactly its ttl %v", tc.interval, tc.ttl)
		}
		before := counterValue(t, removedExpired)
		r.expire(now.Add(tc.ttl + time.Nanosecond))
		if r.len() != 0 || counterValue(t, removedExpired)-before != 1 {
			t.Fatalf("interval %v: not expired after ttl %v", tc.interval, tc.ttl)
		}
		// A push from the expired instance finds nothing and re-creates it.
		v := r.admitPush(&conn{}, &clientLabels{}, a.id, a.subID, false, set, now.Add(tc.ttl+time.Second))
		if v.code != errUnknownSubscriptionID || v.reason != pushUnknownInstance || r.len() != 1 {
			t.Fatalf("push after expiry: %+v", v)
		}
		r.clear()
	}

	// Lookups expire too, without waiting for the sweep.
	r := newRegistry(10, 1<<30)
	defer r.clear()
	set := testSet(t, 1, time.Second)
	now := time.Unix(1000, 0)
	a := r.get(&conn{}, &clientLabels{}, [16]byte{}, set, now)
	b := r.get(&conn{}, &clientLabels{}, a.id, set, now.Add(time.Minute+time.Nanosecond))
	if b.id != a.id || r.len() != 1 {
		t.Fatalf("re-created under the same id: %x vs %x, %d instances", b.id, a.id, r.len())
	}
	v := r.admitPush(&conn{}, &clientLabels{}, a.id, b.subID, false, set, now.Add(time.Minute+time.Nanosecond))
	if v.code != errNone {
		t.Fatalf("push after the re-fetch: %+v", v)
	}
}

func TestRegistryEvictsLeastRecentlySeen(t *testing.T) {
	r := newRegistry(3, 1<<30)
	defer r.clear()
	set := testSet(t, 1, time.Second)
	c := &conn{}
	lbl := &clientLabels{}
	now := time.Unix(1000, 0)
	var ids [4][16]byte
	for i := 0; i < 3; i++ {
		ids[i] = r.get(c, lbl, [16]byte{}, set, now.Add(time.Duration(i)*time.Second)).id
	}
	// Touch the oldest: the second becomes the least recently seen.
	r.get(c, lbl, ids[0], set, now.Add(3*time.Second))
	before := counterValue(t, removedEvicted)
	ids[3] = r.get(c, lbl, [16]byte{}, set, now.Add(4*time.Second)).id
	if r.len() != 3 || counterValue(t, removedEvicted)-before != 1 {
		t.Fatalf("%d instances, %v evictions", r.len(), counterValue(t, removedEvicted)-before)
	}
	r.mu.Lock()
	_, has1 := r.mu.byID[ids[1]]
	_, has0 := r.mu.byID[ids[0]]
	_, has2 := r.mu.byID[ids[2]]
	_, has3 := r.mu.byID[ids[3]]
	r.mu.Unlock()
	if has1 || !has0 || !has2 || !has3 {
		t.Fatalf("wrong instance evicted: kept 0:%v 1:%v 2:%v 3:%v", has0, has1, has2, has3)
	}
	checkList(t, r)
}

// checkList verifies invariant 1 of registry: the list and the map hold the same instances.
func checkList(t *testing.T, r *registry) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	var prev *instance
	for in := r.mu.head; in != nil; in = in.next {
		if r.mu.byID[in.id] != in || in.prev != prev {
			t.Fatal("recency list and map disagree")
		}
		prev = in
		n++
	}
	if n != len(r.mu.byID) || r.mu.tail != prev {
		t.Fatalf("list holds %d, map %d", n, len(r.mu.byID))
	}
}

func TestRegistryDropConn(t *testing.T) {
	r := newRegistry(10, 1<<30)
	defer r.clear()
	set := testSet(t, 1, time.Second)
	c1, c2 := &conn{}, &conn{}
	lbl := &clientLabels{}
	now := time.Unix(1000, 0)
	a := r.get(c1, lbl, [16]byte{}, set, now)
	b := r.get(c2, lbl, [16]byte{}, set, now)
	moved := r.get(c1, lbl, [16]byte{}, set, now)
	r.get(c2, lbl, moved.id, set, now) // last heard on c2 now
	r.dropConn(c1)
	r.mu.Lock()
	_, hasA := r.mu.byID[a.id]
	_, hasB := r.mu.byID[b.id]
	_, hasMoved := r.mu.byID[moved.id]
	r.mu.Unlock()
	if hasA || !hasB || !hasMoved {
		t.Fatalf("after dropping c1: a %v b %v moved %v", hasA, hasB, hasMoved)
	}
	checkList(t, r)
}

// TestInstanceGoneWithConnection closes a real connection and waits for its instance to go;
// an instance last heard on another connection stays.
func TestInstanceGoneWithConnection(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	c1 := dial(t, s, "one")
	c2 := dial(t, s, "two")
	c1.get([16]byte{})
	kept := c2.get([16]byte{})
	if s.reg.len() != 2 {
		t.Fatalf("%d instances", s.reg.len())
	}
	c1.nc.Close()
	testkit.WaitFor(t, "the closed connection's instance to go", func() bool { return s.reg.len() == 1 })
	if again := c2.get(kept.ClientInstanceID); again.SubscriptionID != kept.SubscriptionID {
		t.Fatal("the other connection's instance changed")
	}
}

// TestMaxInstancesOverTCP: with room for two, a third client evicts the least recently seen.
func TestMaxInstancesOverTCP(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInstances = 2
	s, clk := startServer(t, cfg, &testkit.Recorder{})
	c := dial(t, s, "many")
	first := c.get([16]byte{})
	clk.Advance(time.Second)
	second := c.get([16]byte{})
	clk.Advance(time.Second)
	c.get([16]byte{})
	if s.reg.len() != 2 {
		t.Fatalf("%d instances, max 2", s.reg.len())
	}
	payload, _ := testMetrics("m").MarshalVT()
	if code := c.push(first.ClientInstanceID, first.SubscriptionID, 0, payload, false); code != errUnknownSubscriptionID {
		t.Fatalf("evicted instance's push: code %d", code)
	}
	// Re-creating the first evicted the second.
	if code := c.push(second.ClientInstanceID, second.SubscriptionID, 0, payload, false); code != errUnknownSubscriptionID {
		t.Fatalf("second instance's push: code %d", code)
	}
}
