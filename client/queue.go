package client

import (
	"sync"
	"time"
)

// queue holds the requests of one destination that wait to be sent: fresh batches in arrival
// order, requests to send again now (re-sends, due retries), and retries waiting for their
// backoff. Senders (stream lanes, unary workers) take from it with next; everyone else puts
// into it. Requests to send again go before fresh ones: they are older, and their bytes already
// count against the destination's budget.
type queue struct {
	mu struct {
		sync.Mutex
		ready   ring      // send again now
		fresh   ring      // never sent
		delayed delayHeap // retry at due
		closed  bool      // Shutdown began: no fresh batch may enter
	}
	// wake carries one token per put, up to one per sender, so that each put wakes at most
	// one waiting sender and a put while nobody waits is not lost.
	wake chan struct{}
}

func (q *queue) init(senders int) {
	q.wake = make(chan struct{}, senders)
}

func (q *queue) notify() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pushReady queues r to be sent as soon as a sender is free. Safe for concurrent use.
func (q *queue) pushReady(r *request) {
	q.mu.Lock()
	q.mu.ready.push(r)
	q.mu.Unlock()
	q.notify()
}

// pushDelayed queues r to be sent at r.due. Safe for concurrent use.
func (q *queue) pushDelayed(r *request) {
	q.mu.Lock()
	q.mu.delayed.push(r)
	q.mu.Unlock()
	q.notify() // a waiting sender may need an earlier timer
}

// popLocked returns the next request to send, or nil and how long until a delayed one is due
// (-1: none is).
func (q *queue) popLocked(now int64) (*request, time.Duration) {
	for len(q.mu.delayed) > 0 && q.mu.delayed[0].due <= now {
		q.mu.ready.push(q.mu.delayed.pop())
	}
	if r := q.mu.ready.pop(); r != nil {
		return r, 0
	}
	if r := q.mu.fresh.pop(); r != nil {
		return r, 0
	}
	if len(q.mu.delayed) > 0 {
		return nil, time.Duration(q.mu.delayed[0].due - now)
	}
	return nil, -1
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

func (h *delayHeap) pop() *request {
	s := *h
	r := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if rr := l + 1; rr < len(s) && s[rr].due < s[l].due {
			m = rr
		}
		if s[i].due <= s[m].due {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return r
}
