package admission

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/pool"
)

// gate is a weighted semaphore with a FIFO of waiters.
//
// Invariants (under mu):
//  1. used never exceeds max.
//  2. A waiter is in the list until it is granted (granted set, its n added to used) or it
//     removes itself after giving up; never both.
//  3. When the list is not empty, its head does not fit (used+head.n > max): every release and
//     every removal re-checks it.
type gate struct {
	max   int64
	used  atomic.Int64 // written under mu, read lock-free by gauges and tests
	high  atomic.Int64
	total *atomic.Int64 // the process-wide sum this gate adds to, or nil
	peak  *atomic.Int64 // the process-wide high-water mark, or nil
	mu    sync.Mutex
	head  *waiter
	tail  *waiter
}

type waiter struct {
	next    *waiter
	n       int64
	granted bool
	ready   chan struct{} // capacity 1: the grant never blocks the releaser
	timer   *time.Timer
}

// waiterPool keeps waiters, with their channel and timer, through collections (a sync.Pool
// makes all three again after each one), one per request waiting at once.
var waiterPool = pool.NewFreeList(maxFreeWaiters, newWaiter)

const maxFreeWaiters = 1024

func newWaiter() *waiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ready: make(chan struct{}, 1), timer: t}
}

// prefillWaiters is how many waiters NewLimiter makes ahead of traffic: requests queue for
// the intake's budget in bursts, tens at once when the pipeline is behind, and each waiter made
// in the middle of one costs three objects.
const prefillWaiters = 64

// prefillWaiterPool tops the waiters' free list up to prefillWaiters. Safe for concurrent use.
func prefillWaiterPool() {
	for range prefillWaiters - waiterPool.Len() {
		waiterPool.Put(newWaiter())
	}
}

func (g *gate) init(max int64, total, peak *atomic.Int64) {
	g.max, g.total, g.peak = max, total, peak
}

func (g *gate) acquire(n int64, wait time.Duration, done <-chan struct{}) bool {
	if n < 0 || n > g.max {
		return false
	}
	g.mu.Lock()
	if g.head == nil && g.used.Load()+n <= g.max {
		g.takeLocked(n)
		g.mu.Unlock()
		return true
	}
	if wait <= 0 {
		g.mu.Unlock()
		return false
	}
	w := waiterPool.Get()
	w.n, w.granted, w.next = n, false, nil
	if g.tail == nil {
		g.head = w
	} else {
		g.tail.next = w
	}
	g.tail = w
	g.mu.Unlock()

	w.timer.Reset(wait)
	select {
	case <-w.ready:
	case <-w.timer.C:
	case <-done:
	}
	w.timer.Stop()
	g.mu.Lock()
	ok := w.granted
	if !ok {
		g.removeLocked(w)
		// The head may have been waiting behind w only.
		g.grantLocked()
	}
	g.mu.Unlock()
	// A grant that raced with the timer left its token: drain it before the waiter is reused.
	select {
	case <-w.ready:
	default:
	}
	waiterPool.Put(w)
	return ok
}

func (g *gate) release(n int64) {
	g.mu.Lock()
	u := g.used.Add(-n)
	if g.total != nil {
		g.total.Add(-n)
	}
	if u < 0 {
		g.mu.Unlock()
		panic("BUG: intake limiter released more than it granted")
	}
	g.grantLocked()
	g.mu.Unlock()
}

func (g *gate) takeLocked(n int64) {
	u := g.used.Add(n)
	if u > g.high.Load() {
		g.high.Store(u)
	}
	if g.total == nil {
		return
	}
	t := g.total.Add(n)
	if g.peak != nil {
		for p := g.peak.Load(); t > p && !g.peak.CompareAndSwap(p, t); p = g.peak.Load() {
		}
	}
}

// grantLocked grants waiters from the head while they fit.
func (g *gate) grantLocked() {
	for w := g.head; w != nil && g.used.Load()+w.n <= g.max; w = g.head {
		g.head = w.next
		if g.head == nil {
			g.tail = nil
		}
		w.next = nil
		w.granted = true
		g.takeLocked(w.n)
		w.ready <- struct{}{}
	}
}

func (g *gate) removeLocked(w *waiter) {
	var prev *waiter
	for c := g.head; c != nil; prev, c = c, c.next {
		if c != w {
			continue
		}
		if prev == nil {
			g.head = c.next
		} else {
			prev.next = c.next
		}
		if g.tail == c {
			g.tail = prev
		}
		c.next = nil
		return
	}
}

// waiting counts the waiters queued.
func (g *gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for w := g.head; w != nil; w = w.next {
		n++
	}
	return n
}
