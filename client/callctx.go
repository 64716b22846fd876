package client

import (
	"context"
	"sync"
	"time"
)

// callContext is the context of a unary worker's calls: one per worker, used again by each of
// its calls, so that a call costs no context of its own (context.WithCancelCause made two
// objects per call, a quarter of otlpgate's own allocations per forwarded batch). Each call
// still needs a context that can be cancelled alone, by the ack timeout, while the others go on.
//
// Between begin and end it is the context of one call: Done closes when that call is
// cancelled (cancel: the ack timeout; or the destination stopping, through the parent), and
// Value reads the parent's (the outgoing metadata). A Done channel that was closed is replaced
// at the next begin: only a call that was cancelled costs a channel.
//
// grpc-go derives its own cancellable context from the one a call is given; it finds this one
// cancellable through AfterFunc (context.WithCancel looks for that method), so the derivation
// starts no goroutine. The functions AfterFunc registers are kept in slots that live as long
// as the worker, each with its stop function made once, so registering allocates nothing
// after the first calls.
//
// Invariants:
//
//  1. Between calls (after end, before begin) nothing is registered and nothing refers to the
//     call that ended; a cancel then is recorded for the next call only if the parent is done.
//  2. A registered function runs at most once, outside mu, and never after its stop returned
//     true.
type callContext struct {
	parent context.Context // the destination's: outgoing metadata; cancelled when it stops
	// shared: Done serves the package's two shared channels instead of one of its own
	// (newStreamContext).
	shared bool
	// values is what Value reads: parent, or a context under it with the outgoing metadata
	// of the call's batch's tenant (forward-headers). Set by use, between calls.
	values context.Context

	mu struct {
		sync.Mutex
		done  chan struct{} // closed once the call is cancelled
		err   error         // context.Canceled once done is closed
		cause error         // why: errAckTimeout, or the parent's error
		slots []afterSlot
	}
}

type afterSlot struct {
	f    func() // nil: free
	stop func() bool
}

// newCallContext makes the context of one worker under parent. The caller must call release
// when the worker ends, which stops following parent.
func newCallContext(parent context.Context) (c *callContext, release func() bool) {
	c = &callContext{parent: parent, values: parent}
	c.mu.done = make(chan struct{})
	// The destination stopping cancels the call under way; begin checks the parent for calls
	// that start after that.
	return c, context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
}

// newStreamContext is newCallContext for a stream object, which is cancelled at the end of
// every stream it carries (a re-open every RebalanceBytes): a channel per cancel would cost an
// allocation per re-open. Its Done is therefore good for a look, not for a wait: it is the
// shared closed channel once cancelled, the shared open one, never closed, before. The context
// package looks (a select with a default) and then ties children through AfterFunc, and grpc-go
// waits only on the child it derives at the start of NewStream; the lane, which waits for a
// stream's end, waits on the stream's own signal (stream.over).
//
// It is made with the slot grpc-go's child takes (AfterFunc), so that a stream object made
// ahead of traffic (prefill) costs nothing at its first stream either.
func newStreamContext(parent context.Context) (c *callContext, release func() bool) {
	c, release = newCallContext(parent)
	c.shared, c.mu.done = true, nil
	c.mu.slots = make([]afterSlot, 0, 1)
	c.addSlotLocked(nil)
	return c, release
}

// neverDone and closedDone are the Done channels of every stream context (newStreamContext):
// before its cancel and after it.
var neverDone, closedDone = make(chan struct{}), func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// use makes Value read values, a context under parent, from the next call on. Called by the
// worker between calls: grpc-go reads the outgoing metadata while it opens the call's stream,
// on the worker's goroutine.
func (c *callContext) use(values context.Context) { c.values = values }

// begin makes the context ready for a call. Called by the worker before the call.
func (c *callContext) begin() {
	c.mu.Lock()
	if c.mu.err != nil {
		if !c.shared {
			c.mu.done = make(chan struct{})
		}
		c.mu.err, c.mu.cause = nil, nil
	}
	c.mu.Unlock()
	if err := c.parent.Err(); err != nil {
		c.cancel(err)
	}
}

// end forgets what grpc-go registered for the call (its own context is done by now, or will
// never need this one again) and returns why the call was cancelled, nil if it was not.
// Called by the worker after the call.
func (c *callContext) end() (cause error) {
	c.mu.Lock()
	for i := range c.mu.slots {
		c.mu.slots[i].f = nil
	}
	cause = c.mu.cause
	c.mu.Unlock()
	return cause
}

// cancel cancels the call under way with cause, and runs what was registered for it. Safe
// for concurrent use; the ack timer and the parent's AfterFunc call it.
func (c *callContext) cancel(cause error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	c.mu.err, c.mu.cause = context.Canceled, cause
	if !c.shared {
		close(c.mu.done)
	}
	// A cancel is rare (an ack timeout, the destination stopping): the list may allocate. It
	// is this call's own, since the parent's cancel may still run these while the worker's next
	// call begins and is cancelled in turn.
	var run []func()
	for i := range c.mu.slots {
		if f := c.mu.slots[i].f; f != nil {
			run = append(run, f)
			c.mu.slots[i].f = nil
		}
	}
	c.mu.Unlock()
	// Outside mu: a registered function is a child context's cancel, which calls back into
	// stop through the child's removal from this parent.
	for _, f := range run {
		f()
	}
}

// Deadline implements context.Context: a call has none of its own (the ack timeout runs from
// the send, not from the start, and is the worker's timer).
func (c *callContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Done implements context.Context.
func (c *callContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.shared:
		return c.mu.done
	case c.mu.err != nil:
		return closedDone
	}
	return neverDone
}

// Err implements context.Context.
func (c *callContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// Value implements context.Context.
func (c *callContext) Value(key any) any { return c.values.Value(key) }

// AfterFunc arranges for f to run once the call is cancelled, as context.AfterFunc does; the
// context package uses it to tie a child context to this one without a goroutine. f runs on
// the goroutine that cancels, not on one of its own: the context package's functions only
// cancel a child, which is quick. Safe for concurrent use.
//
// A stop function belongs to its slot, not to one registration: it must not be called once
// the call it was returned for has ended. grpc-go cancels its derived context (which calls
// stop) before the call's RecvMsg returns, or before NewStream returns when that fails, so its
// stop calls never outlive the call.
func (c *callContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		// Cancelled since the caller looked: the context package calls this holding the
		// child's lock, which f takes, so f cannot run here.
		go f()
		return stopped
	}
	for i := range c.mu.slots {
		if c.mu.slots[i].f == nil {
			c.mu.slots[i].f = f
			stop = c.mu.slots[i].stop
			c.mu.Unlock()
			return stop
		}
	}
	stop = c.addSlotLocked(f)
	c.mu.Unlock()
	return stop
}

// addSlotLocked adds a slot holding f (nil: free) and returns its stop function. c.mu must be
// held.
func (c *callContext) addSlotLocked(f func()) (stop func() bool) {
	i := len(c.mu.slots)
	c.mu.slots = append(c.mu.slots, afterSlot{f: f, stop: func() bool { return c.stopSlot(i) }})
	return c.mu.slots[i].stop
}

// stopSlot unregisters the function in slot i, reporting whether it had not run.
func (c *callContext) stopSlot(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.slots[i].f == nil {
		return false
	}
	c.mu.slots[i].f = nil
	return true
}

func stopped() bool { return false }
