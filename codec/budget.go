package codec

import (
	"errors"
	"strings"
)

// Budget is the memory decompression may inflate into. A decompressor with a Budget takes
// Config.InflateClaim bytes from it, at once, before it writes the first byte past
// FreeInflate, and gives them back when the message is closed, which gRPC does as soon as it
// holds the decompressed message (the receiver's own reservation covers it from then on).
//
// A decompressor takes from the Budget once per message, never more: one that holds bytes
// never waits for more, and so every holder finishes (decompression reads memory, not the
// network), however many wait. That lets Acquire wait long rather than refuse, which matters
// because gRPC reports a decompressor's error as INTERNAL, which OTLP clients do not retry.
//
// Both methods must be safe for concurrent use.
type Budget interface {
	// Acquire takes n bytes, waiting until they can be had (a bounded time), or reports
	// false.
	Acquire(n int) bool
	// Release gives back n bytes taken by Acquire.
	Release(n int)
}

// FreeInflate is what a message may inflate into before its decompressor takes from the
// Budget: the replies and small requests that make up most traffic never touch it, and what
// they hold is bounded by the messages being decompressed at once.
const FreeInflate = 64 << 10

// ErrInflateBudget is what a decompressor returns when its Budget refused its claim, or when a
// message inflates past FreeInflate plus the claim (larger than any message the receiver
// accepts). IsInflateBudget recognises it inside the status gRPC wraps it in.
var ErrInflateBudget = errors.New("codec: no room to decompress the message (inflate budget)")

// meter charges a Budget for the output of one decompression, before the output is written.
// It belongs to one pooled decompressor and is reset for each message.
type meter struct {
	b        Budget
	claim    int // what one message takes from b
	produced int // bytes returned so far
	taken    int // bytes taken from b, given back by release
}

func (m *meter) reset(b Budget, claim int) { m.b, m.claim, m.produced, m.taken = b, claim, 0, 0 }

// allow returns how many of n bytes the decompressor may write now: up to FreeInflate without
// the Budget, and past it once the claim was taken.
func (m *meter) allow(n int) (int, error) {
	if m.b == nil || n == 0 {
		return n, nil
	}
	if m.taken == 0 && m.produced >= FreeInflate {
		if !m.b.Acquire(m.claim) {
			return 0, ErrInflateBudget
		}
		m.taken = m.claim
	}
	credit := FreeInflate + m.taken - m.produced
	if credit <= 0 {
		return 0, ErrInflateBudget
	}
	return min(n, credit), nil
}

// release gives back everything taken for the message.
func (m *meter) release() {
	if m.taken > 0 {
		m.b.Release(m.taken)
	}
	m.b, m.produced, m.taken = nil, 0, 0
}

// IsInflateBudget reports whether err, as gRPC returns it from receiving a message, came from a
// Budget's refusal. gRPC formats the decompressor's error into its status message, so the test
// is on the text. Safe for concurrent use.
func IsInflateBudget(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, ErrInflateBudget) || strings.Contains(err.Error(), ErrInflateBudget.Error())
}
