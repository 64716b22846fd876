package client

import (
	"strings"
	"testing"
	"time"

	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// A throttled destination pauses; another destination fed the same batches keeps delivering
// all of them meanwhile. The throttled one sends nothing more until it is shut down.
func TestThrottlePausesOnlyThatDestination(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 6
		slow, fast := newUpstream(t), newUpstream(t)
		slow.onStream = func(s *srvStream, g received) error { return throttleErr(time.Hour) }
		a := startDest(t, streamConfigOn(t, tr, slow.addr, 1, 1)) // window 1: only b0 is ever in flight
		b := startDest(t, streamConfigOn(t, tr, fast.addr, 1, 8))
		f := newFeeder(t, a, b)
		f.send(0, n, 1, 10)
		fast.waitUntil("every batch at the unthrottled upstream", func() bool { return len(fast.got) == n })
		for i := 0; value(a.m.throttles) == 0; i++ {
			if i == 3000 {
				t.Fatal("throttle never counted")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := shutdown(t, a, 50*time.Millisecond); err == nil {
			t.Error("shutdown of the throttled destination reported no loss")
		}
		for i, ok := range f.waitAll() {
			if ok {
				t.Errorf("batch %d reported delivered by both destinations", i)
			}
		}
		if tags := slow.tags(); len(tags) != 1 || tags[0] != "b0" {
			t.Errorf("throttled upstream received %v, want only b0 once", tags)
		}
		if v := value(b.m.ackedRequests); v != n {
			t.Errorf("unthrottled destination acknowledged %d, want %d", v, n)
		}
		q, r := value(a.m.dropped[DropShutdownQueued]), value(a.m.dropped[DropShutdownRetry])
		if q != n-1 || r != 1 {
			t.Errorf("throttled destination lost %d queued and %d waiting to be re-sent; want %d and 1", q, r, n-1)
		}
	})
}

// Throttles in a row double the pause, starting at the server's retry delay. The gaps are
// measured at the upstream and checked only from below, which no slowness can break.
func TestThrottleBacksOff(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const delay = 50 * time.Millisecond
		for _, mode := range []string{ModeStream, ModeUnary} {
			t.Run(mode, func(t *testing.T) {
				u := newUpstream(t)
				var arrivals []time.Time
				note := func() int {
					u.mu.Lock()
					defer u.mu.Unlock()
					arrivals = append(arrivals, time.Now())
					return len(arrivals)
				}
				u.onStream = func(s *srvStream, g received) error {
					if note() <= 3 {
						return throttleErr(delay)
					}
					s.ack(g.id, otepv1.ResultCode_Success)
					return nil
				}
				u.onUnary = func(g received) (otepv1.ResultCode, error) {
					if note() <= 3 {
						return 0, throttleErr(delay)
					}
					return otepv1.ResultCode_Success, nil
				}
				cfg := streamConfigOn(t, tr, u.addr, 1, 4)
				if mode == ModeUnary {
					cfg = unaryConfig(t, u.addr, ProtocolOTEP, 1)
				}
				cfg.RetryMax = time.Second
				d := startDest(t, cfg)
				f := newFeeder(t, d)
				f.send(0, 1, 1, 10)
				if !f.wait(0) {
					t.Fatal("not delivered")
				}
				u.mu.Lock()
				defer u.mu.Unlock()
				if len(arrivals) != 4 {
					t.Fatalf("%d sends, want 4", len(arrivals))
				}
				for i := 1; i < 4; i++ {
					want := delay << (i - 1)
					if gap := arrivals[i].Sub(arrivals[i-1]); gap < want {
						t.Errorf("send %d came %v after the throttle, want at least %v", i+1, gap, want)
					}
				}
				if tags := strings.Join(u.tagsLocked(), ","); tags != "b0,b0,b0,b0" {
					t.Errorf("sends %s", tags)
				}
				if v := value(d.m.throttles); v != 3 {
					t.Errorf("throttles %d, want 3", v)
				}
			})
		}
	})
}
