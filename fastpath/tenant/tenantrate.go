package tenant

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Per-tenant rate limits (-tenant.rate, -tenant.burst): every tenant has a token bucket of its
// own, filled at Rate.PerSecond up to Rate.Burst, in bytes or in items. The gRPC and OTLP/HTTP
// intakes take a request's cost from its tenant's bucket once the request is scanned (its size
// and items known) and before it is admitted, and refuse it, with the time until the bucket
// holds enough, when it does not: one tenant over its rate is told to wait while every other
// tenant at the same edge is served as before. The UDS and Kafka intakes, which have no tenant
// headers and answer refusals their own way, are not limited.
//
// A request costs its bytes as received (decompressed) or its items. It is admitted when the
// bucket holds its cost, or a full bucket when the cost is larger than the burst (so that no
// request is refused for ever), and the bucket may then go below zero: a tenant that sent a
// large request waits for it to be paid off.

// Rate is the per-tenant token bucket of -tenant.rate and -tenant.burst. The zero value
// limits nothing.
type Rate struct {
	// PerSecond is the rate the bucket fills at, in tokens per second; 0 turns limits off.
	PerSecond float64
	// Burst is the bucket's size in tokens: what a tenant may send at once after a quiet spell.
	Burst float64
	// Items counts tokens in items (spans, data points, log records); false counts bytes.
	Items bool
}

// On reports whether tenants are limited.
func (r Rate) On() bool { return r.PerSecond > 0 }

func (r Rate) validate() error {
	switch {
	case r.PerSecond < 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0):
		return fmt.Errorf("fastpath: -tenant.rate %v must not be negative", r.PerSecond)
	case r.On() && !(r.Burst >= 1 && !math.IsInf(r.Burst, 0)):
		return fmt.Errorf("fastpath: -tenant.burst %v must be at least 1", r.Burst)
	}
	return nil
}

// SetRate replaces the rate every tenant is limited to (a reload of -tenant.rate and
// -tenant.burst) while requests flow: each tenant keeps its bucket, whose tokens the new rate
// fills from then on, up to the new burst; a tenant new to the table starts with a full one,
// and so does every tenant when limits were off (its bucket was never filled). Safe for
// concurrent use.
func (ts *Table) SetRate(r Rate) error {
	if err := r.validate(); err != nil {
		return err
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	was := ts.rate.Swap(&r)
	if was.On() || !r.On() {
		return nil
	}
	now := nanotime()
	for _, t := range ts.mu.all {
		if t != nil {
			t.bucket.Lock()
			t.bucket.tokens, t.bucket.last = r.Burst, now
			t.bucket.Unlock()
		}
	}
	return nil
}

// Rate returns the rate in force. Safe for concurrent use.
func (ts *Table) Rate() Rate { return *ts.rate.Load() }

// bucket is a tenant's token bucket. Guarded by its own lock, which only requests of the one
// tenant contend for.
type bucket struct {
	sync.Mutex
	tokens float64
	last   int64 // monotonic nanoseconds of the last fill
}

// ErrRate refuses a request whose tenant is over its rate (-tenant.rate); Tenant.Take
// returns how long to wait.
var ErrRate = errors.New("fastpath: the tenant is over its rate (-tenant.rate)")

// Take takes the cost of a request of bytes bytes and items items from the tenant's bucket and
// reports true, or, when the bucket does not hold it, takes nothing and returns how long until
// it does (at least a millisecond). Always true without a rate. A refusal is counted in the
// tenant's throttled counters. Safe for concurrent use; allocates nothing.
func (t *Tenant) Take(bytes, items int) (time.Duration, bool) {
	if !t.tab.rate.Load().On() {
		return 0, true // no clock read without a rate
	}
	return t.takeAt(bytes, items, nanotime())
}

// takeAt is Take at the monotonic time now.
func (t *Tenant) takeAt(bytes, items int, now int64) (time.Duration, bool) {
	r := *t.tab.rate.Load()
	if !r.On() {
		return 0, true
	}
	cost := float64(bytes)
	if r.Items {
		cost = float64(items)
	}
	need := min(cost, r.Burst)
	b := &t.bucket
	b.Lock()
	if now > b.last {
		b.tokens = min(r.Burst, b.tokens+float64(now-b.last)/1e9*r.PerSecond)
		b.last = now
	}
	if b.tokens >= need {
		b.tokens -= cost
		b.Unlock()
		return 0, true
	}
	wait := (need - b.tokens) / r.PerSecond
	b.Unlock()
	t.throttled.Add(1)
	d := time.Duration(math.Ceil(wait * 1e9))
	return max(d, time.Millisecond), false
}

// Wait returns how long until the tenant's bucket holds a request of bytes bytes and items
// items (at least a millisecond), without taking anything: the delay a refused request is
// told. 0 without a rate. Safe for concurrent use.
func (t *Tenant) Wait(bytes, items int) time.Duration {
	r := *t.tab.rate.Load()
	if !r.On() {
		return 0
	}
	cost := float64(bytes)
	if r.Items {
		cost = float64(items)
	}
	need := min(cost, r.Burst)
	now := nanotime()
	t.bucket.Lock()
	tokens := min(r.Burst, t.bucket.tokens+float64(max(now-t.bucket.last, 0))/1e9*r.PerSecond)
	t.bucket.Unlock()
	if tokens >= need {
		return time.Millisecond
	}
	return max(time.Duration(math.Ceil((need-tokens)/r.PerSecond*1e9)), time.Millisecond)
}

// Refund gives back what Take took for a request that was then not admitted (the queue was
// full, say): it is sent again, and must not pay twice. Safe for concurrent use.
func (t *Tenant) Refund(bytes, items int) {
	r := *t.tab.rate.Load()
	if !r.On() {
		return
	}
	cost := float64(bytes)
	if r.Items {
		cost = float64(items)
	}
	t.bucket.Lock()
	t.bucket.tokens = min(r.Burst, t.bucket.tokens+cost)
	t.bucket.Unlock()
}

// epoch anchors the buckets' monotonic clock.
var epoch = time.Now()

func nanotime() int64 { return int64(time.Since(epoch)) }
