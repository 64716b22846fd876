package client

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
)

func TestBackoff(t *testing.T) {
	c := Config{RetryInitial: 100 * time.Millisecond, RetryMax: 3 * time.Second}
	for n := int32(1); n <= 12; n++ {
		base := min(c.RetryInitial<<(n-1), c.RetryMax)
		lo, hi := base/2, min(base*3/2, c.RetryMax)
		seenLow, seenHigh := false, false
		for range 2000 {
			d := c.backoff(n)
			if d < lo || d > hi {
				t.Fatalf("retry %d: %v outside [%v, %v]", n, d, lo, hi)
			}
			seenLow = seenLow || d < base*9/10
			seenHigh = seenHigh || (d > base*11/10 || base*3/2 > c.RetryMax)
		}
		if !seenLow || !seenHigh {
			t.Errorf("retry %d: no jitter around %v", n, base)
		}
	}
}

func TestThrottlePause(t *testing.T) {
	c := Config{RetryInitial: 10 * time.Millisecond, RetryMax: time.Second}
	f := func(delay time.Duration, n int32, want time.Duration) {
		t.Helper()
		for range 1000 {
			if d := c.throttlePause(delay, n); d < want || d > want+want/5 {
				t.Fatalf("throttle %d of %v: pause %v, want %v..%v", n, delay, d, want, want+want/5)
			}
		}
	}
	f(100*time.Millisecond, 1, 100*time.Millisecond)
	f(100*time.Millisecond, 2, 200*time.Millisecond)
	f(100*time.Millisecond, 4, 800*time.Millisecond)
	f(100*time.Millisecond, 9, time.Second) // capped at RetryMax
	f(5*time.Second, 1, 5*time.Second)      // never below the server's delay
	f(5*time.Second, 3, 5*time.Second)      // nor doubled past it when above RetryMax
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err       error
		streamEnd bool
		want      verdict
		delay     time.Duration
	}{
		{io.EOF, true, verdictRetry, 0},
		{fmt.Errorf("wrapped: %w", io.EOF), true, verdictRetry, 0},
		{status.Error(codes.Unavailable, "x"), false, verdictRetry, 0},
		{throttleErr(3 * time.Second), false, verdictThrottle, 3 * time.Second},
		{throttleErr(0), false, verdictRetry, 0},
		{status.Error(codes.ResourceExhausted, "x"), false, verdictReject, 0},
		{status.Error(codes.DeadlineExceeded, "x"), false, verdictRetry, 0},
		{status.Error(codes.Aborted, "x"), false, verdictRetry, 0},
		{status.Error(codes.DataLoss, "x"), false, verdictRetry, 0},
		{status.Error(codes.InvalidArgument, "x"), true, verdictReject, 0},
		{status.Error(codes.Unimplemented, "unknown service otlpgate.otep.v1.StreamExporter"), true, verdictUnserved, 0},
		{status.Error(codes.Unimplemented, "unknown method Export for service x"), false, verdictUnserved, 0},
		{status.Error(codes.Unimplemented, "x"), false, verdictUnserved, 0},
		{status.Error(codes.Unimplemented, `grpc: Decompressor is not installed for grpc-encoding "gzip"`), false, verdictReject, 0},
		{status.Error(codes.Unimplemented, "Can't find decompressor for snappy"), true, verdictReject, 0},
		{status.Error(codes.Unauthenticated, "x"), true, verdictReject, 0},
		{status.Error(codes.PermissionDenied, "x"), false, verdictReject, 0},
		{status.Error(codes.Internal, "x"), false, verdictReject, 0},
		{status.Error(codes.Internal, "x"), true, verdictRetry, 0},
		{status.Error(codes.Unknown, "x"), true, verdictRetry, 0},
		{errors.New("not a status"), false, verdictReject, 0},
	}
	for _, c := range cases {
		v, d := classify(c.err, c.streamEnd)
		if v != c.want || d != c.delay {
			t.Errorf("classify(%v, stream=%v) = %d, %v; want %d, %v", c.err, c.streamEnd, v, d, c.want, c.delay)
		}
	}
	// A RESOURCE_EXHAUSTED with RetryInfo is a throttle too.
	st, _ := status.New(codes.ResourceExhausted, "x").WithDetails(throttleDetails(time.Second))
	if v, d := classify(st.Err(), false); v != verdictThrottle || d != time.Second {
		t.Errorf("RESOURCE_EXHAUSTED+RetryInfo = %d, %v", v, d)
	}
}

func TestQueueOrder(t *testing.T) {
	// The ring keeps FIFO order across wrap-around and growth.
	var r ring
	next, want := uint64(1), uint64(1)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10_000 {
		if rng.IntN(3) > 0 || r.len() == 0 {
			r.push(&request{id: next})
			next++
			continue
		}
		if got := r.pop(); got.id != want {
			t.Fatalf("popped %d, want %d", got.id, want)
		}
		want++
	}
	// The heap pops by due time.
	var h delayHeap
	for range 1000 {
		h.push(&request{due: rng.Int64N(1000)})
	}
	last := int64(-1)
	for len(h) > 0 {
		r := h.pop()
		if r.due < last {
			t.Fatalf("due %d after %d", r.due, last)
		}
		last = r.due
	}
	// Requests to send again go before fresh ones, and a delayed one only once due.
	var q queue
	q.init(1)
	q.pushFreshLocked(&request{id: 1})
	q.pushDelayed(&request{id: 2, due: 100})
	q.pushReady(&request{id: 3})
	var order []uint64
	for now := int64(0); len(order) < 3; now += 60 {
		q.mu.Lock()
		r, wait := q.popLocked(fastpath.Traces, now)
		q.mu.Unlock()
		if r == nil {
			if wait != time.Duration(100-now) {
				t.Fatalf("at %d: wait %v, want %v", now, wait, time.Duration(100-now))
			}
			continue
		}
		order = append(order, r.id)
	}
	if fmt.Sprint(order) != "[3 1 2]" {
		t.Errorf("order %v, want [3 1 2]", order)
	}
}
