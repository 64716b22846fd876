package pipeline

import (
	"errors"
	"fmt"

	"github.com/otlpgate/otlpgate/pool"
)

// Budget bounds bytes held at once by everyone who takes from it: the intake limiter's budget
// of an intake (internal/admission). What a request's processing writes (Config.Processor's
// rewritten entries, the route split's pieces) and what the OTLP/JSON transcoder writes are
// charged to it as they grow, beside the body the intake already holds: a step that writes
// more than it reads (-resource.set on two-byte empty entries, packed numbers in JSON) must
// not take memory that the limits do not know of.
type Budget interface {
	// TryTake takes n bytes without waiting, false when the budget has no room for them.
	// Safe for concurrent use.
	TryTake(n int64) bool
	// Give returns n bytes taken by TryTake. Safe for concurrent use.
	Give(n int64)
}

// ErrBudget: the intake limiter had no room for what a request's processing or transcoding
// was about to write. It is ErrFull to the intakes (errors.Is): backpressure, retried, never
// the client's fault; counted as intake_bytes in otlpgate_fastpath_refused_items_total.
var ErrBudget = fmt.Errorf("%w: the intake limiter has no room for the processed request (-intake.max-bytes)", ErrFull)

// Errors of the spool's admission (spool/feed) when the spool cannot take a request now. Both
// are ErrFull to the intakes, which answer with backpressure; defined here so that the
// intakes count them under their own reasons (spool_full, spool_io) without importing the
// spool.
var (
	ErrSpoolFull = fmt.Errorf("%w: the spool is full (-spool.max-bytes)", ErrFull)
	ErrSpoolIO   = fmt.Errorf("%w: the spool could not write", ErrFull)
)

// errOverQueue: processing would make a request larger than the whole queue. It is
// ErrTooLarge to everyone; the request could never be admitted, however long it waited.
var errOverQueue = fmt.Errorf("%w after processing", ErrTooLarge)

// budgetRefusal reports why err refused a request at Prepare, for the refusal counters: intake
// bytes, too large, or false for an error that is not a refusal for room.
func budgetRefusal(err error) (Refusal, bool) {
	switch {
	case errors.Is(err, ErrBudget):
		return RefusedBudget, true
	case errors.Is(err, errOverQueue):
		return RefusedTooLarge, true
	}
	return 0, false
}

// charged is a pooled buffer whose capacity past free bytes was taken from a Budget before it
// was made (none without a budget), within a bound on its length. free is the size of the
// request it is made from: the request's intake holds its bytes already, so a copy of that
// size is bounded with them, and charging it again would refuse ordinary requests whenever
// reservations fill the budget (a gRPC call reserves -grpc.max-recv-msg-size while it is
// admitted). What a step writes beyond it is what no bound knew of. The zero value holds
// nothing.
type charged struct {
	b     Budget
	max   int // the longest the content may become: Config.QueueMaxBytes
	free  int // capacity not charged
	buf   *[]byte
	taken int64
}

// charge takes from the budget what a buffer of capacity n holds past free.
func (c *charged) charge(n int) (int64, bool) {
	m := int64(n - c.free)
	if c.b == nil || m <= 0 {
		return 0, true
	}
	return m, c.b.TryTake(m)
}

// get makes the buffer with room for size bytes, charged first; ErrBudget when the budget
// refused, errOverQueue when size is past the bound.
func (c *charged) get(size int) error {
	if size > c.max {
		return errOverQueue
	}
	n := pool.Cap(size)
	m, ok := c.charge(n)
	if !ok {
		return ErrBudget
	}
	c.taken = m
	c.buf = pool.GetBytes(size)
	// A pooled buffer may come with more room than its tier promises: cut to what was taken.
	*c.buf = (*c.buf)[:0:n]
	return nil
}

// grow replaces the buffer, whose content is out, with one of room for need bytes at least
// (twice the old one when the bound allows), charged before it is made; the old one and its
// charge are given back once copied. It returns the new content, or out and an error as get.
func (c *charged) grow(out []byte, need int) ([]byte, error) {
	if need > c.max {
		return out, errOverQueue
	}
	size := max(need, min(2*cap(out), c.max))
	n := pool.Cap(size)
	m, ok := c.charge(n)
	if !ok {
		return out, ErrBudget
	}
	nb := pool.GetBytes(size)
	*nb = append((*nb)[:0:n], out...)
	*c.buf = out[:0]
	pool.PutBytes(c.buf)
	if c.taken > 0 {
		c.b.Give(c.taken)
	}
	c.buf, c.taken = nb, m
	return *nb, nil
}

// release returns the buffer to the pool and its charge to the budget; calling it again does
// nothing.
func (c *charged) release() {
	if c.buf != nil {
		pool.PutBytes(c.buf)
		c.buf = nil
	}
	if c.taken > 0 {
		c.b.Give(c.taken)
		c.taken = 0
	}
}
