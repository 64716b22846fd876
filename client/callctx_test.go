package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A context derived from a call's context, as grpc-go derives its own, is cancelled with the
// call and only with it: an ack timeout cancels the call under way, the next call begins
// uncancelled, and the destination's context ending cancels the call under way and every
// later one.
func TestCallContext(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	c, release := newCallContext(parent)
	defer release()

	c.begin()
	child, cancelChild := context.WithCancel(c)
	c.cancel(errAckTimeout)
	select {
	case <-child.Done():
	case <-time.After(waitFor):
		t.Fatal("the derived context was not cancelled with the call")
	}
	cancelChild()
	if cause := c.end(); cause != errAckTimeout {
		t.Fatalf("end() = %v, want the ack timeout", cause)
	}

	c.begin() // the next call starts afresh
	if c.Err() != nil {
		t.Fatalf("a new call begins cancelled: %v", c.Err())
	}
	child, cancelChild = context.WithCancel(c)
	cancelChild() // the call ends normally: grpc-go cancels its own context, unregistering it
	if cause := c.end(); cause != nil {
		t.Fatalf("end() = %v after a call nobody cancelled", cause)
	}
	if c.Err() != nil || child.Err() == nil {
		t.Fatalf("after a normal call: call %v, derived %v", c.Err(), child.Err())
	}

	c.begin()
	child, cancelChild = context.WithCancel(c)
	defer cancelChild()
	stop() // the destination stops
	select {
	case <-child.Done():
	case <-time.After(waitFor):
		t.Fatal("the destination stopping did not cancel the call under way")
	}
	if cause := c.end(); !errors.Is(cause, context.Canceled) {
		t.Fatalf("end() = %v, want the parent's error", cause)
	}
	c.begin()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatal("a call that begins after the destination stopped is not cancelled")
	}
	c.end()
	if c.Value(ctxKey{}) != nil {
		t.Error("Value invents a value")
	}
}

type ctxKey struct{}
