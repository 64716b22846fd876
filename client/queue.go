package client

import (
	"sync"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
)

// queue holds the requests of one destination that wait to be sent, one set per signal:
// fresh batches in arrival order, requests to send again now (re-sends, due retries), and
// retries waiting for their backoff. Each sender (stream lane, unary worker) serves one signal
// and takes only from that signal's set, so a signal whose upstream stops answering holds up
// its own senders and never another signal's. Everyone else puts into it. Requests to send
// again go before fresh ones: they are older, and their bytes already count against the
// destination's budget.
//
// One mutex guards every signal: ids are given under it in Enqueue order across signals, and
// Shutdown empties all of them at once. The destination leaves its running state under it too
// (lifecycle.go), so that Enqueue's check of the state and its put are one step.
type queue struct {
	mu struct {
		sync.Mutex
		sig [fastpath.NumSignals]signalQueue
	}
	// wake carries, per signal, one token per put, up to one per sender of that signal, so
	// that each put wakes at most one waiting sender and a put while nobody waits is not lost.
	wake [fastpath.NumSignals]chan struct{}
}

// signalQueue is what waits to be sent for one signal.
type signalQueue struct {
	ready   ring      // send again now
	fresh   ring      // never sent
	delayed delayHeap // retry at due
}

// init sizes the wake-ups for senders goroutines per signal.
func (q *queue) init(senders int) {
	for i := range q.wake {
		q.wake[i] = make(chan struct{}, senders)
	}
}

func (q *queue) notify(sig fastpath.Signal) {
	select {
	case q.wake[sig] <- struct{}{}:
	default:
	}
}

// pushFreshLocked queues r, never sent, behind the fresh requests of its signal.
func (q *queue) pushFreshLocked(r *request) { q.mu.sig[r.sig].fresh.push(r) }

// pushReadyLocked queues r behind the requests of its signal to send again now, ahead of the
// fresh ones.
func (q *queue) pushReadyLocked(r *request) { q.mu.sig[r.sig].ready.push(r) }

// pushReady queues r to be sent as soon as a sender of its signal is free. Safe for concurrent
// use.
func (q *queue) pushReady(r *request) {
	sig := r.sig
	q.mu.Lock()
	q.mu.sig[sig].ready.push(r)
	q.mu.Unlock()
	q.notify(sig)
}

// pushDelayed queues r to be sent at r.due. Safe for concurrent use.
func (q *queue) pushDelayed(r *request) {
	sig := r.sig
	q.mu.Lock()
	q.mu.sig[sig].delayed.push(r)
	q.mu.Unlock()
	q.notify(sig) // a waiting sender may need an earlier timer
}

// releaseOutage makes every delayed request waiting out an outage's backoff (request.outage)
// due at now, and wakes the senders of their signals: the upstream answers again, and those
// requests are older than what the senders take meanwhile. Safe for concurrent use.
func (q *queue) releaseOutage(now int64) {
	var n [fastpath.NumSignals]int
	q.mu.Lock()
	for sig := range q.mu.sig {
		h := q.mu.sig[sig].delayed
		for _, r := range h {
			if r.outage {
				r.outage, r.released, r.due = false, true, now
				n[sig]++
			}
		}
		if n[sig] > 0 {
			h.fix()
		}
	}
	q.mu.Unlock()
	for sig := range n {
		for range min(n[sig], cap(q.wake[sig])) {
			q.notify(fastpath.Signal(sig))
		}
	}
}

// popLocked returns the next request of sig to send, or nil and how long until a delayed one
// of sig is due (-1: none is).
func (q *queue) popLocked(sig fastpath.Signal, now int64) (*request, time.Duration) {
	s := &q.mu.sig[sig]
	for len(s.delayed) > 0 && s.delayed[0].due <= now {
		s.ready.push(s.delayed.pop())
	}
	if r := s.ready.pop(); r != nil {
		return r, 0
	}
	if r := s.fresh.pop(); r != nil {
		return r, 0
	}
	if len(s.delayed) > 0 {
		return nil, time.Duration(s.delayed[0].due - now)
	}
	return nil, -1
}

// takeAllLocked empties every signal's queue: requests that were sent before (to send again
// or waiting for a retry) go to again, never-sent ones to fresh, both in no particular order
// across signals. For Shutdown.
func (q *queue) takeAllLocked(again, fresh []*request) ([]*request, []*request) {
	for i := range q.mu.sig {
		s := &q.mu.sig[i]
		for r := s.ready.pop(); r != nil; r = s.ready.pop() {
			again = append(again, r)
		}
		for len(s.delayed) > 0 {
			again = append(again, s.delayed.pop())
		}
		for r := s.fresh.pop(); r != nil; r = s.fresh.pop() {
			fresh = append(fresh, r)
		}
	}
	return again, fresh
}

// ring is a FIFO of requests on a circular slice that grows by doubling and is reused.
type ring struct {
	buf  []*request
	head int
	n    int
}

func (q *ring) push(r *request) {
	if q.n == len(q.buf) {
		nb := make([]*request, max(16, 2*len(q.buf)))
		for i := range q.n {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = r
	q.n++
}

func (q *ring) pop() *request {
	if q.n == 0 {
		return nil
	}
	r := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return r
}

func (q *ring) len() int { return q.n }

// delayHeap is a binary min-heap of requests by due time.
type delayHeap []*request

func (h *delayHeap) push(r *request) {
	*h = append(*h, r)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].due <= s[i].due {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

// fix restores the heap's order after any dues changed.
func (h delayHeap) fix() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down moves the request at i down to where its due belongs.
func (h delayHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if rr := l + 1; rr < len(h) && h[rr].due < h[l].due {
			m = rr
		}
		if h[i].due <= h[m].due {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h *delayHeap) pop() *request {
	s := *h
	r := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	s.down(0)
	*h = s
	return r
}
