package testkit

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// Received is one batch handed to a Recorder's Enqueue, or one request given to its Consume.
type Received struct {
	Signal fastpath.Signal
	Items  int
	Body   []byte    // a copy of the bytes, exactly as given
	At     time.Time // when it arrived
	Tenant string    // the batch's tenant (tenant.Tenant.String), "" without one
}

// Recorder is a pipeline.Destination and a pipeline.Consumer that keeps a copy of everything it
// is given, in arrival order. By default it finishes each batch at once as delivered; SetHold
// keeps batches unfinished (an upstream that does not drain) until Release, SetFail finishes
// them as undelivered, and SetErr refuses everything with an error, keeping nothing.
//
// The zero value is ready to use and named "recorder".
type Recorder struct {
	name string

	mu struct {
		sync.Mutex
		got  []Received
		held []*pipeline.Batch // nil where ReleaseAt finished one
		hold bool
		fail bool
		err  error
	}
}

var (
	_ pipeline.Destination = (*Recorder)(nil)
	_ pipeline.Consumer    = (*Recorder)(nil)
)

// NewRecorder returns a recorder named name (the destination's name in metrics).
func NewRecorder(name string) *Recorder { return &Recorder{name: name} }

// NewHoldingRecorder returns a recorder named name that holds every batch until Release: an
// upstream that does not drain.
func NewHoldingRecorder(name string) *Recorder {
	r := &Recorder{name: name}
	r.mu.hold = true
	return r
}

// Name implements pipeline.Destination.
func (r *Recorder) Name() string {
	if r.name == "" {
		return "recorder"
	}
	return r.name
}

// Enqueue implements pipeline.Destination: it keeps a copy of b's bytes and, unless holding,
// finishes b before it returns.
func (r *Recorder) Enqueue(b *pipeline.Batch) error {
	r.mu.Lock()
	if err := r.mu.err; err != nil {
		r.mu.Unlock()
		return err
	}
	var tenant string
	if b.Tenant != nil {
		tenant = b.Tenant.String()
	}
	r.mu.got = append(r.mu.got, Received{b.Signal, b.Items, bytes.Clone(b.Payload.Bytes()), time.Now(), tenant})
	if r.mu.hold {
		r.mu.held = append(r.mu.held, b)
		r.mu.Unlock()
		return nil
	}
	ok := !r.mu.fail
	r.mu.Unlock()
	b.Done(ok)
	return nil
}

// Consume implements pipeline.Consumer: it keeps a copy of req.Body.
func (r *Recorder) Consume(req pipeline.Request) error {
	sig, body, items := req.Signal, req.Body, req.Items
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.err != nil {
		return r.mu.err
	}
	r.mu.got = append(r.mu.got, Received{sig, items, bytes.Clone(body), time.Now(), ""})
	return nil
}

// SetHold makes Enqueue keep the batches that follow unfinished, until Release.
func (r *Recorder) SetHold(on bool) {
	r.mu.Lock()
	r.mu.hold = on
	r.mu.Unlock()
}

// SetFail makes Enqueue finish the batches that follow as undelivered.
func (r *Recorder) SetFail(on bool) {
	r.mu.Lock()
	r.mu.fail = on
	r.mu.Unlock()
}

// SetErr makes Enqueue and Consume return err and keep nothing (nil: accept again).
func (r *Recorder) SetErr(err error) {
	r.mu.Lock()
	r.mu.err = err
	r.mu.Unlock()
}

// Release stops holding and finishes every batch still held, oldest first, as delivered or
// not; it returns how many it finished.
func (r *Recorder) Release(delivered bool) int {
	r.mu.Lock()
	held := r.mu.held
	r.mu.held, r.mu.hold = nil, false
	r.mu.Unlock()
	n := 0
	for _, b := range held {
		if b != nil {
			b.Done(delivered)
			n++
		}
	}
	return n
}

// ReleaseAt finishes the i-th batch held since the last Release (0 is the oldest) as delivered
// or not, and keeps holding the others. It panics if that batch was already finished.
func (r *Recorder) ReleaseAt(i int, delivered bool) {
	r.mu.Lock()
	b := r.mu.held[i]
	r.mu.held[i] = nil
	r.mu.Unlock()
	if b == nil {
		panic("testkit: ReleaseAt of a batch already released")
	}
	b.Done(delivered)
}

// Held returns how many batches are held unfinished.
func (r *Recorder) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.mu.held {
		if b != nil {
			n++
		}
	}
	return n
}

// Received returns everything kept so far, in arrival order. The bodies are the recorder's
// copies: read them, do not modify them.
func (r *Recorder) Received() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.mu.got...)
}

// Count returns how many batches or requests were kept.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.got)
}

// Payload returns every body kept, of every signal, back to back, and the sum of their items.
func (r *Recorder) Payload() ([]byte, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []byte
	items := 0
	for _, g := range r.mu.got {
		out = append(out, g.Body...)
		items += g.Items
	}
	return out, items
}

// Bodies returns the bodies of sig kept so far, in arrival order.
func (r *Recorder) Bodies(sig fastpath.Signal) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, g := range r.mu.got {
		if g.Signal == sig {
			out = append(out, g.Body)
		}
	}
	return out
}

// SpanIDs counts, per span id (its first 8 bytes, big-endian), the spans of the trace bodies
// kept so far; bad counts the bodies that do not decode.
func (r *Recorder) SpanIDs() (ids map[uint64]int, bad int) {
	ids = map[uint64]int{}
	for _, g := range r.Received() {
		if g.Signal != fastpath.Traces {
			continue
		}
		got, err := SpanIDs(g.Body)
		if err != nil {
			bad++
		}
		for _, id := range got {
			ids[id]++
		}
	}
	return ids, bad
}

// WaitCount waits (as WaitFor does) until at least n batches or requests were kept, and
// returns them.
func (r *Recorder) WaitCount(t testing.TB, n int) []Received {
	t.Helper()
	WaitFor(t, fmt.Sprintf("%s to receive %d batches or requests", r.Name(), n), func() bool { return r.Count() >= n })
	return r.Received()
}
