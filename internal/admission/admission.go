package admission

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Reason is why a request was not accepted, or Accepted.
type Reason int

// Accepted is the Reason of a request that was admitted (or was empty) and, with -ack=upstream,
// delivered.
const Accepted Reason = -1

// Why a request was not accepted. The values index the intakes' refusal counters.
const (
	Invalid   Reason = iota // the scanner or the transcoder rejected it
	Full                    // no queue space now
	TooLarge                // larger than the whole queue
	Closed                  // shutting down
	Upstream                // -ack=upstream: a destination did not deliver it
	Timeout                 // -ack=upstream: the wait ended before the destinations answered
	Throttled               // its tenant is over -tenant.rate: retry after the tenant's wait
	SpoolFull               // with a spool: -spool.max-bytes reached; answered as Full
	SpoolIO                 // with a spool: it could not write (a full disk); answered as Full
	Busy                    // the intake limiter had no room for what processing writes: answered as its refusals are
	Unserved                // no destination takes its signal (-dest signals=): not retryable
	NumReasons
)

var names = [NumReasons]string{"invalid", "queue_full", "too_large", "closed", "upstream_failed", "canceled", "tenant_rate", "spool_full", "spool_io", "intake_bytes", "unserved"}

// MsgUnserved is what the intakes answer a request of a signal no destination takes
// (Unserved) with.
const MsgUnserved = "no destination takes this signal: add it to a -dest's signals= (by default a destination takes traces, metrics and logs)"

// String returns the reason as used in metric labels. Safe for concurrent use.
func (r Reason) String() string {
	if r >= 0 && r < NumReasons {
		return names[r]
	}
	return "accepted"
}

// Backpressure reports whether r is a refusal for want of room after admission (the queue or
// the spool), which the intakes answer alike: retry after QueueDelay, and, when it lasts,
// overload. Safe for concurrent use.
func (r Reason) Backpressure() bool { return r == Full || r == SpoolFull || r == SpoolIO }

// Of maps an error of pipeline.Admitter.Admit to a Reason: the spool's and the budget's
// refusals apart from a full queue, so that every intake counts them under the reason the
// pipeline does.
func Of(err error) Reason {
	switch {
	case err == nil:
		return Accepted
	case errors.Is(err, pipeline.ErrSpoolFull):
		return SpoolFull
	case errors.Is(err, pipeline.ErrSpoolIO):
		return SpoolIO
	case errors.Is(err, pipeline.ErrBudget):
		return Busy
	case errors.Is(err, pipeline.ErrFull):
		return Full
	case errors.Is(err, pipeline.ErrTooLarge):
		return TooLarge
	case errors.Is(err, pipeline.ErrClosed):
		return Closed
	case errors.Is(err, pipeline.ErrUnserved):
		return Unserved
	}
	// The re-tag found what a scan at a shallower depth let through.
	return Invalid
}

// Await waits for an admitted batch's upstream answer (-ack=upstream; b is nil otherwise) and
// drops the reference on it. Accepted when every destination delivered it.
func Await(ctx context.Context, b *pipeline.Batch) Reason {
	if b == nil {
		return Accepted
	}
	ok, err := b.Wait(ctx)
	b.Unref()
	switch {
	case err != nil:
		return Timeout
	case !ok:
		return Upstream
	}
	return Accepted
}

// Control admits requests for one intake and tracks its refusal episodes. The zero value is
// not usable: call Init.
type Control struct {
	p             pipeline.Admitter
	lim           *Limiter // nil: no intake limit
	overloadAfter time.Duration
	// refusingSince is the unix-nano time refusals for want of queue space began, 0 while
	// requests are admitted; lastRefusal is the time of the latest refusal. Shared by every
	// request of the intake: the queue is shared too.
	refusingSince atomic.Int64
	lastRefusal   atomic.Int64
}

// Init sets what requests are admitted into (a pipeline.Pipeline, or with a spool the spool's
// admission; nil in tests of the episode rules only), the intake limiter (nil for none) and
// how long refusals must last before they are overload. Call once, before use.
func (c *Control) Init(p pipeline.Admitter, lim *Limiter, overloadAfter time.Duration) {
	c.p, c.lim, c.overloadAfter = p, lim, overloadAfter
}

// Admit hands a checked request to the admitter: its tenant (req.Origin.Tenant,
// -intake.headers; nil: the default tenant) joins a batch of its requests only, its client
// address goes to the processing steps, a compressed request (req.Wire) may travel as it
// arrived and a buffer the intake offers (req.Own) may become a batch's (pipeline.Request). A
// tenant over its rate (-tenant.rate) is refused as Throttled before admission, and told to
// wait TenantDelay; it is charged for req.Body, the request as sent plain (decompressed), and
// what a request took from its tenant's bucket is given back when admission then refuses it.
// An admission ends the refusal episode. The caller must not read req.Body after an admission
// when it offered req.Own. Safe for concurrent use.
func (c *Control) Admit(req pipeline.Request) (*pipeline.Batch, Reason) {
	t := req.Origin.Tenant
	n := len(req.Body) // *req.Own, which holds it, may be exchanged by the call
	if t != nil {
		if _, ok := t.Take(n, req.Items); !ok {
			return nil, Throttled
		}
	}
	b, err := c.p.Admit(req)
	if err != nil {
		if t != nil {
			t.Refund(n, req.Items)
		}
		return nil, Of(err)
	}
	if c.refusingSince.Load() != 0 {
		c.refusingSince.Store(0)
	}
	return b, Accepted
}

// Overloaded records a refusal for want of queue space and reports whether refusals have now
// lasted at least overloadAfter, when the intakes answer with their harder "go away" (gRPC
// ends the call or stream with UNAVAILABLE, HTTP answers 503 rather than 429). Safe for
// concurrent use.
func (c *Control) Overloaded() bool { return c.OverloadedAt(time.Now().UnixNano()) }

// OverloadedAt is Overloaded at the unix-nano time now. A refusal episode ends when a request
// is admitted, and also when no refusal came for longer than overloadAfter: the queue then had
// room, or nobody asked. Without the second rule an episode that ended without a later
// admission (the clients went quiet) would stay open, and the first refusal after a long quiet
// period would skip the grace altogether.
func (c *Control) OverloadedAt(now int64) bool {
	last := c.lastRefusal.Swap(now)
	since := c.refusingSince.Load()
	if since == 0 || time.Duration(now-last) > c.overloadAfter {
		// Racing refusals start the episode once; a lost race sees a time at most as old.
		if !c.refusingSince.CompareAndSwap(since, now) {
			since = c.refusingSince.Load()
		} else {
			since = now
		}
	}
	return time.Duration(now-since) >= c.overloadAfter
}

// AckUpstream reports whether the intake answers a request only once its batch was delivered
// (-ack=upstream): Admit then returns the batch to wait on.
func (c *Control) AckUpstream() bool { return c.p.Ack() == pipeline.AckUpstream }

// QueueDelay is how long a client refused for want of queue space (or whose batch the
// upstream gave up, with -ack=upstream) should wait: sized from the queue's drain rate.
func (c *Control) QueueDelay() time.Duration { return c.p.RetryDelay() }

// TenantDelay is how long a client whose request of req bytes and items items was refused as
// Throttled should wait: until its tenant's bucket holds the request.
func TenantDelay(t *tenant.Tenant, req []byte, items int) time.Duration {
	return t.Wait(len(req), items)
}

// BusyDelay is how long a client the intake limiter refused should wait: the limiter's own
// wait, which is what the refused request just waited in vain.
func (c *Control) BusyDelay() time.Duration { return c.lim.Wait() }

// Limiter returns the intake limiter, nil for none.
func (c *Control) Limiter() *Limiter { return c.lim }

// Hold is the intake limiter's reservation for one request being received and admitted: a
// gRPC call's message, an HTTP body and its decompressed copy as they grow. The zero value
// holds nothing.
type Hold struct {
	lim  *Limiter
	acct *Account // the connection's account, when the bytes came from one
	tick uint64   // when the account's reservation was taken
	in   Intake
	n    int64
}

// Take reserves n more bytes for in, waiting up to -intake.wait or until done is closed. It
// reports false when the limiter refused (counted there); h keeps what it held before. Without
// a limiter it takes nothing and reports true. h must not hold bytes of another intake or
// account.
func (c *Control) Take(h *Hold, in Intake, n int64, done <-chan struct{}) bool {
	if c.lim == nil {
		return true
	}
	if !c.lim.AcquireBytes(in, n, done) {
		return false
	}
	h.lim, h.in, h.n = c.lim, in, h.n+n
	return true
}

// TakeFrom reserves n bytes from a connection's account (gRPC), within its share
// (-intake.max-conn-bytes), waiting like Take. It is one reservation: h must hold nothing, and
// gives it back whole.
func (c *Control) TakeFrom(h *Hold, a *Account, n int64, done <-chan struct{}) bool {
	if h.n != 0 {
		panic("BUG: admission: a hold takes from an account once")
	}
	tick, ok := a.Acquire(n, done)
	if !ok {
		return false
	}
	h.acct, h.tick, h.in, h.n = a, tick, a.Intake(), n
	return true
}

// TryTake is Take without waiting and without counting a refusal, and TryTakeFrom is TakeFrom
// so: for an event loop that tries first and, refused, waits for room on a goroutine of its own
// with Take or TakeFrom (which count the refusal, if it comes).
func (c *Control) TryTake(h *Hold, in Intake, n int64) bool {
	if c.lim == nil {
		return true
	}
	if !c.lim.take(in, n, 0, nil) {
		return false
	}
	h.lim, h.in, h.n = c.lim, in, h.n+n
	return true
}

// TryTakeFrom: see TryTake.
func (c *Control) TryTakeFrom(h *Hold, a *Account, n int64) bool {
	if h.n != 0 {
		panic("BUG: admission: a hold takes from an account once")
	}
	tick, ok := a.TryAcquire(n)
	if !ok {
		return false
	}
	h.acct, h.tick, h.in, h.n = a, tick, a.Intake(), n
	return true
}

// Give returns n of the bytes h holds, as when a buffer was replaced by a larger one. An
// account's reservation is given back whole only.
func (h *Hold) Give(n int64) {
	if n <= 0 {
		return
	}
	if n > h.n {
		panic("BUG: admission: giving back more than the hold holds")
	}
	if h.acct != nil {
		if n != h.n {
			panic("BUG: admission: an account's reservation is given back whole")
		}
		h.acct.Release(n, h.tick)
		h.n, h.acct = 0, nil
		return
	}
	h.n -= n
	h.lim.ReleaseBytes(h.in, n)
}

// Held returns the bytes h holds.
func (h *Hold) Held() int64 { return h.n }

// Release gives the reservation back; calling it again does nothing.
func (h *Hold) Release() { h.Give(h.n) }

// RetryAfterSeconds is d as an HTTP Retry-After value: whole seconds rounded up, at least one,
// because the header has no finer unit and 0 would invite an immediate retry.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(int64(math.Ceil(d.Seconds())), 1)
}
