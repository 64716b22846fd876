package admission

import (
	"sync"
	"time"
)

// Account is one connection's share of a Limiter, for the intake whose connections receive
// several requests at once (gRPC, whose calls are multiplexed on one HTTP/2 connection): what
// the connection's requests hold together is capped at MaxConnBytes, so that one client, with
// however many calls it opens and then stalls, takes at most that much of the budget the
// other clients are served from.
//
// A gRPC call cannot be charged as its bytes arrive: gRPC lets a message's whole length in as
// soon as the handler asks for the message, so the handler reserves the largest message before
// it asks. The cap, and the progress deadline the intake enforces on a connection that holds
// bytes (Limiter.ProgressTimeout), bound what such reservations of bytes that never come can
// cost the others. For the deadline the account keeps the age of its reservations in ticks of
// the intake's sweep (Tick): each reservation is counted under the tick it was taken in, and
// the oldest one still held is the connection's age.
//
// Safe for concurrent use. Make one per connection with NewAccount.
type Account struct {
	lim *Limiter
	in  Intake
	own gate // the connection's cap; it adds to no process-wide sum
	mu  struct {
		sync.Mutex
		tick uint64
		// held counts the reservations taken at each of the last accountTicks ticks, at
		// index tick % accountTicks; older ones are in ancient.
		held    [accountTicks]int32
		ancient int32
	}
}

// accountTicks is how many ticks an account tells apart; older reservations are all as old.
const accountTicks = 8

// NewAccount returns an empty account of intake in. It allocates: call it once per connection.
// Safe for concurrent use.
func (l *Limiter) NewAccount(in Intake) *Account {
	a := &Account{lim: l, in: in}
	a.own.init(l.maxConn, nil, nil)
	return a
}

// Acquire takes n bytes for one request of the connection, from the connection's share and
// from the intake's budget, waiting up to the Limiter's wait for both together (or until done
// is closed; nil never is). It reports false when either refused, counted as a conn_bytes or a
// bytes refusal of the intake, and at once when n exceeds either bound. tick is when the
// reservation was taken: give it back with Release(n, tick). Safe for concurrent use.
func (a *Account) Acquire(n int64, done <-chan struct{}) (tick uint64, ok bool) {
	l := a.lim
	var start time.Time
	if l.wait > 0 {
		start = time.Now()
	}
	// The connection's own share first: a connection at its cap waits there, behind its own
	// requests, without holding anything of the budget the other connections share.
	if !a.own.acquire(n, l.wait, done) {
		intakeRefusedC[a.in][refusedConnBytes].Inc()
		return 0, false
	}
	var rest time.Duration
	if l.wait > 0 {
		rest = max(l.wait-time.Since(start), 0)
	}
	if !l.take(a.in, n, rest, done) {
		a.own.release(n)
		intakeRefusedC[a.in][refusedBytes].Inc()
		return 0, false
	}
	return a.hold(), true
}

// TryAcquire is Acquire without waiting and without counting a refusal: for an event loop that
// tries first and, refused, waits for room elsewhere (with Acquire, which counts). Safe for
// concurrent use.
func (a *Account) TryAcquire(n int64) (tick uint64, ok bool) {
	if !a.own.acquire(n, 0, nil) {
		return 0, false
	}
	if !a.lim.take(a.in, n, 0, nil) {
		a.own.release(n)
		return 0, false
	}
	return a.hold(), true
}

// hold counts one more reservation at the current tick and returns the tick, for Release.
func (a *Account) hold() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	tick := a.mu.tick
	a.mu.held[tick%accountTicks]++
	return tick
}

// Release gives back the n bytes of one reservation taken by Acquire at tick. Safe for
// concurrent use.
func (a *Account) Release(n int64, tick uint64) {
	a.lim.ReleaseBytes(a.in, n)
	a.own.release(n)
	a.mu.Lock()
	if a.mu.tick-tick >= accountTicks {
		a.mu.ancient--
	} else {
		a.mu.held[tick%accountTicks]--
	}
	a.mu.Unlock()
}

// Tick starts the next tick of the intake's sweep and returns the age, in ticks, of the oldest
// reservation still held: 0 when there is none or all were taken in the tick that just ended,
// accountTicks at most. Safe for concurrent use; one sweep calls it.
func (a *Account) Tick() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.tick++
	// The slot the new tick reuses counted reservations accountTicks old: they become ancient.
	i := a.mu.tick % accountTicks
	a.mu.ancient += a.mu.held[i]
	a.mu.held[i] = 0
	if a.mu.ancient > 0 {
		return accountTicks
	}
	for age := accountTicks - 1; age > 0; age-- {
		if a.mu.held[(a.mu.tick-uint64(age))%accountTicks] > 0 {
			return age
		}
	}
	return 0
}

// Held returns what the connection's requests hold now. Safe for concurrent use.
func (a *Account) Held() int64 { return a.own.used.Load() }

// Intake returns the intake the account is of. Safe for concurrent use.
func (a *Account) Intake() Intake { return a.in }
