package tenant

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Idle tenants (-intake.tenant-idle) leave the table, so that their places under
// -intake.max-tenants go to new ones. A tenant is idle when no Lookup has found it for the
// idle time and no batch of it is open: each Lookup stamps the tenant with the clock, and each
// open batch pins it (openset.go). A sweep takes out the tenants stamped before the idle time
// that no batch pins; it runs when a new tuple finds the table full, and otherwise at most
// every half idle time, on the request that finds it due or, without requests, on the
// pipeline's age flusher (Pipeline.flusher).
//
// What holds a *Tenant is never broken by its leaving: the tenant keeps its values, record,
// routes and bucket, so that a request between its Lookup and its batch, a sealed batch on its
// way to a destination (forward-headers) and a stream that looked its tenant up when it
// opened all go on as before. Only its id is given to a later tenant, and the id is what the
// open batches are found by: an expired tenant's id is never used to find a batch again (a
// batch opened for it after it expired sits apart, under its pointer), and a tenant is only
// swept when it pins no batch, so that two tenants in the table never share an id and an
// open batch is never found for a tenant it does not belong to.
//
// The pin count and the expired mark share one word, so that pinning and sweeping cannot
// cross: a sweep marks the tenant only from zero pins, and a pin that finds the mark knows
// the tenant is gone. When the values of an expired tenant come back they are interned as a
// new tenant: with a new id, a full rate bucket (a tenant idle for -intake.tenant-idle starts
// afresh) and, when the tuple had a labelled metric series, the same series (tenantmetrics.go).

// expiredBit marks Tenant.pins of a tenant that has left its table; the low bits count the
// batches open for it.
const expiredBit = 1 << 62

var tenantsExpired = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_tenants_expired_total",
	Help: "Tenants that left the table after -intake.tenant-idle without a request or an open batch, freeing their place under -intake.max-tenants.",
})

// touch stamps t used at now. The stamp is written only when it moved by a sixteenth of the
// idle time, so that the requests of a busy tenant on many cores do not all write one cache
// line: a tenant may leave up to that much before its full idle time.
func (t *Tenant) touch(now int64, idle time.Duration) {
	if now-t.used.Load() >= int64(idle)/16 {
		t.used.Store(now)
	}
}

// expired reports whether t has left its table.
func (t *Tenant) expired() bool { return t.pins.Load()&expiredBit != 0 }

// Expired reports whether t has left its table (-intake.tenant-idle): whoever held it since
// before (a long-lived stream) should look its values up again, which interns them anew, so
// that its requests count and are rate-limited under the tenant the table now holds. Safe for
// concurrent use.
func (t *Tenant) Expired() bool { return t != nil && t.expired() }

// Pins returns how many open batches pin t: the idle sweep leaves a tenant with any in the
// table. Safe for concurrent use.
func (t *Tenant) Pins() int64 { return t.pins.Load() &^ expiredBit }

// Pin counts a batch opened for t and reports whether t is still in its table; an expired
// tenant's batch must not be found by its id. Every Pin is undone by Unpin. Safe for
// concurrent use.
func (t *Tenant) Pin() bool { return t.pins.Add(1)&expiredBit == 0 }

// Unpin undoes a Pin. Safe for concurrent use.
func (t *Tenant) Unpin() { t.pins.Add(-1) }

// sweep is sweepLocked for a request that finds a sweep due; it skips the sweep when another
// one, or an insert, holds the lock.
func (ts *Table) sweep(now int64) {
	last := ts.swept.Load()
	if now-last < int64(ts.cfg.Idle)/2 || !ts.swept.CompareAndSwap(last, now) || !ts.mu.TryLock() {
		return
	}
	defer ts.mu.Unlock()
	ts.sweepLocked(now)
}

// SweepSoon takes the idle tenants out of the table unless a sweep ran within half the idle
// time or is running: the pipeline's flusher calls it as it ticks, so that the tenants of a
// quiet gateway leave without traffic too. Safe for concurrent use.
func (ts *Table) SweepSoon() { ts.sweep(ts.clock()) }

// SetClock makes now the table's clock, in nanoseconds (by default the monotonic time since
// the process started), for tests that move time by hand. Call it before the table is used.
func (ts *Table) SetClock(now func() int64) { ts.clock = now }

// Idle returns how long a tenant may stay idle in the table (Config.Idle; 0: for good). Safe
// for concurrent use.
func (ts *Table) Idle() time.Duration { return ts.cfg.Idle }

// Sweep takes the idle tenants out of the table now, and returns how many left. Safe for
// concurrent use.
func (ts *Table) Sweep() int {
	if ts.cfg.Idle <= 0 {
		return 0
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.sweepLocked(ts.clock())
}

// sweepLocked takes out the tenants last used before now less the idle time that pin no
// batch, and returns how many. It allocates only when one leaves.
func (ts *Table) sweepLocked(now int64) int {
	n := ts.markIdleLocked(now)
	if n > 0 {
		ts.dropExpiredLocked(n)
	}
	return n
}

// markIdleLocked marks expired the tenants last used before now less the idle time that pin
// no batch, and returns how many; they are still in the index.
// A table found full of busy tenants is not scanned again before the first of them can be
// idle (mu.nextIdle), so that a client sending new values to a full table costs a clock read
// per request, not a walk of the table.
func (ts *Table) markIdleLocked(now int64) int {
	ts.swept.Store(now)
	if now < ts.mu.nextIdle {
		return 0
	}
	cutoff := now - int64(ts.cfg.Idle)
	n := 0
	// A tenant added from now on is stamped now or later.
	oldest := now
	for _, t := range ts.mu.all[min(1, len(ts.mu.all)):] { // the default tuple stays
		if t == nil {
			continue
		}
		if used := t.used.Load(); used <= cutoff && t.pins.CompareAndSwap(0, expiredBit) {
			n++
		} else {
			oldest = min(oldest, used)
		}
	}
	// A tenant stays used at least until its stamp plus the idle time: stamps only move on.
	ts.mu.nextIdle = oldest + int64(ts.cfg.Idle)
	return n
}

// dropExpiredLocked takes the n tenants markIdleLocked marked out of the index, frees their
// ids and keeps their counts.
func (ts *Table) dropExpiredLocked(n int) {
	x := ts.index.Load()
	for id, t := range ts.mu.all {
		if t != nil && t.expired() {
			x.removeLocked(t)
			ts.releasePeerLocked(t)
			ts.mu.all[id] = nil
			ts.mu.free = append(ts.mu.free, uint32(id))
			ts.foldSeriesLocked(t)
		}
	}
	tenantsExpired.Add(float64(n))
	tenantsKnown.Set(float64(x.len()))
}
