package client

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// errUndecodable is what grpc-go's server (and so the Collector) ends a stream with when it
// cannot unmarshal a request read on it.
var errUndecodable = status.Error(codes.Internal, "grpc: error unmarshalling request: proto: cannot parse invalid wire-format data")

// errOversized is what grpc-go's server ends a stream with when a message exceeds its receive
// limit: the Collector's is 4MiB by default, below otlpgate's max-send-msg-size.
var errOversized = status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5242880 vs. 4194304)")

// answers records the Success answers an upstream sent, per id.
type answers struct {
	mu sync.Mutex
	n  map[uint64]int
}

func (a *answers) ack(s *srvStream, id uint64) {
	a.mu.Lock()
	if a.n == nil {
		a.n = map[uint64]int{}
	}
	if id != 0 { // 0: a probe (poison.go), no request of the test's
		a.n[id]++
	}
	a.mu.Unlock()
	s.ack(id, otepv1.ResultCode_Success)
}

// ackAll answers every request pending on s.
func (a *answers) ackAll(s *srvStream) {
	s.mu.Lock()
	var pend []uint64
	for id := range s.unacked {
		pend = append(pend, id)
	}
	s.mu.Unlock()
	slices.Sort(pend)
	for _, id := range pend {
		a.ack(s, id)
	}
}

// check verifies that every id of want was answered Success exactly once, and no other.
func (a *answers) check(t *testing.T, want []uint64) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range want {
		if a.n[id] != 1 {
			t.Errorf("id %d answered Success %d times, want once", id, a.n[id])
		}
	}
	if len(a.n) != len(want) {
		var extra []uint64
		for id := range a.n {
			if !slices.Contains(want, id) {
				extra = append(extra, id)
			}
		}
		t.Errorf("ids answered that should not have been: %v", extra)
	}
}

// poisonUpstream serves OTEP streams like a Collector that cannot decode the request tagged
// poison: reading it ends the stream with end (errUndecodable when nil). Until it first reads it, the answers to
// the requests tagged in held wait, so that they are pending on the stream it breaks.
func poisonUpstream(t *testing.T, window int, poison string, held map[string]bool, end error) (*upstream, *answers) {
	if end == nil {
		end = errUndecodable
	}
	u := newUpstream(t)
	u.window = window
	a := &answers{}
	var mu sync.Mutex
	seen := false
	type heldReq struct {
		s  *srvStream
		id uint64
	}
	var waiting []heldReq
	u.onStream = func(s *srvStream, g received) error {
		mu.Lock()
		defer mu.Unlock()
		if g.tag == poison {
			seen = true
			for _, w := range waiting {
				if w.s != s {
					a.ack(w.s, w.id) // held on another lane's stream: its wait is over
				}
			}
			waiting = nil
			return end
		}
		if !seen && held[g.tag] {
			waiting = append(waiting, heldReq{s, g.id})
			return nil
		}
		a.ack(s, g.id)
		return nil
	}
	return u, a
}

// drops returns the destination's dropped requests by reason, only the reasons that count.
func drops(d *Dest) map[DropReason]int {
	out := map[DropReason]int{}
	for r := range numDropReasons {
		if v := value(d.m.dropped[r]); v != 0 {
			out[r] = v
		}
	}
	return out
}

// One request among 51 is one the upstream cannot decode. It breaks the stream it is pipelined
// on, with three requests before it still unanswered; those and every other request are
// delivered, each answered exactly once, and the poison is dropped after PoisonAfter streams
// it broke alone, counted once under stream_poison. The streams opened stay bounded: one for
// the first break, one per strike, and the stream that carries on.
func TestStreamPoisonDropped(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		for _, c := range []struct {
			name    string
			streams int
			elapsed time.Duration // RetryMaxElapsed: 0 is what the spool forces
			end     error
		}{
			{"streams=1", 1, waitFor * 2, nil},
			{"streams=2", 2, waitFor * 2, nil},
			// With the spool no budget ends the re-sends: strikes alone must.
			{"retry-max-elapsed=0", 2, 0, nil},
			// A message over the upstream's receive limit ends the stream with RESOURCE_EXHAUSTED
			// and no RetryInfo, on every stream it is sent on.
			{"oversized", 2, 0, errOversized},
		} {
			t.Run(c.name, func(t *testing.T) {
				const n, window, poisonAt, after = 51, 8, 25, 3
				poison := "b" + strconv.Itoa(poisonAt)
				u, a := poisonUpstream(t, window, poison, map[string]bool{"b22": true, "b23": true, "b24": true}, c.end)
				cfg := streamConfigOn(t, tr, u.addr, c.streams, window)
				cfg.RetryMaxElapsed = c.elapsed
				if cfg.PoisonAfter != after {
					t.Fatalf("default poison-after %d, want %d", cfg.PoisonAfter, after)
				}
				d := startDest(t, cfg)
				f := newFeeder(t, d)
				f.send(0, n, 1, 10)
				// Bounded: without poison detection the poison is re-sent until the budget (or,
				// with retry-max-elapsed=0, for ever) and f.wait fails the test at waitFor.
				ok := f.waitAll()
				var good []uint64
				for i, delivered := range ok {
					if delivered != (i != poisonAt) {
						t.Errorf("b%d delivered=%v", i, delivered)
					}
					if i != poisonAt {
						good = append(good, uint64(i+1))
					}
				}
				a.check(t, good)
				checkIDs(t, f, u.received())
				u.checkViolations()
				if got := drops(d); len(got) != 1 || got[DropStreamPoison] != 1 {
					t.Errorf("dropped %v, want stream_poison: 1 only", got)
				}
				if v := value(d.m.droppedItems[DropStreamPoison]); v != 1 {
					t.Errorf("dropped items (stream_poison) %d, want 1", v)
				}
				sent := count(u.tags())[poison]
				// Once pipelined, then alone once per strike; with two lanes the first send may
				// already find it alone (the held requests are on the other lane's stream), and
				// that read is its first strike; and a lone read before any other request was
				// delivered since it became a suspect is no strike (poison.go): one more.
				if sent < after || sent > after+3 {
					t.Errorf("poison read %d times, want %d to %d (once pipelined, then alone once per strike)", sent, after, after+3)
				}
				u.mu.Lock()
				opened := len(u.streams)
				u.mu.Unlock()
				if limit := after + 2*c.streams + 2; opened > limit {
					t.Errorf("%d streams opened, want at most %d", opened, limit)
				}
				t.Logf("poison read %d times; %d streams opened; %d requests re-sent", sent, opened, value(d.m.resent))
				if v := value(d.m.streamsOpened); v != opened {
					t.Errorf("streams opened counted %d, the upstream saw %d", v, opened)
				}
				if err := shutdown(t, d, waitFor); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// A proxy resets a stream once with INTERNAL_ERROR (INTERNAL to the client), and the same
// requests then go through: nothing is dropped, every request is answered exactly once, and
// the lane pipelines again afterwards (the upstream then answers only once four requests are
// pending on a stream, which a lane stuck sending one at a time would never reach).
func TestStreamTransientInternal(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		for _, c := range []struct {
			name    string
			pending int // requests pending on the first stream when it is reset
		}{{"shared", 3}, {"alone", 1}} {
			t.Run(c.name, func(t *testing.T) {
				const window, batch = 8, 4
				u := newUpstream(t)
				u.window = window
				a := &answers{}
				var mu sync.Mutex
				phase := 1
				u.onStream = func(s *srvStream, g received) error {
					mu.Lock()
					p := phase
					mu.Unlock()
					switch {
					case s.n == 1 && s.pending() == c.pending:
						return status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR")
					case s.n == 1:
						return nil
					case p == 1:
						a.ack(s, g.id)
					case s.pending() >= batch:
						a.ackAll(s)
					}
					return nil
				}
				d := startDest(t, streamConfigOn(t, tr, u.addr, 1, window))
				f := newFeeder(t, d)
				f.send(0, c.pending, 1, 10)
				if ok := f.waitAll(); !allTrue(ok) {
					t.Fatalf("delivered after the reset: %v", ok)
				}
				mu.Lock()
				phase = 2
				mu.Unlock()
				f.send(c.pending, 2*batch, 1, 10)
				if ok := f.waitAll(); !allTrue(ok) {
					t.Fatalf("delivered: %v", ok)
				}
				a.check(t, seq(1, uint64(c.pending+2*batch)))
				checkIDs(t, f, u.received())
				u.checkViolations()
				if got := drops(d); len(got) != 0 {
					t.Errorf("dropped %v, want nothing", got)
				}
				if err := shutdown(t, d, waitFor); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// poison-after=0 turns detection off: a request that ends every stream it is sent on with
// INTERNAL is sent again as before, until its budget runs out (retry_exhausted).
func TestStreamPoisonAfterOff(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const window = 8
		u, _ := poisonUpstream(t, window, "b0", nil, nil)
		cfg := streamConfigOn(t, tr, u.addr, 1, window)
		cfg.PoisonAfter = 0
		cfg.RetryMaxElapsed = time.Second
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 1, 1, 10)
		if f.wait(0) {
			t.Fatal("the poison was delivered")
		}
		if got := drops(d); len(got) != 1 || got[DropRetryExhausted] != 1 {
			t.Errorf("dropped %v, want retry_exhausted: 1 only", got)
		}
		if sent := count(u.tags())["b0"]; sent <= cfg.PoisonAfter+4 {
			t.Errorf("poison read %d times: not sent again as with detection off", sent)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// poison-after parses, defaults to 3, and refuses a negative count.
func TestParsePoisonAfter(t *testing.T) {
	f := func(spec string, want int, wantErr bool) {
		t.Helper()
		c, err := ParseDest("name=p,endpoint=127.0.0.1:1"+spec, DefaultConfig())
		if (err != nil) != wantErr {
			t.Fatalf("%q: err %v", spec, err)
		}
		if err == nil && c.PoisonAfter != want {
			t.Errorf("%q: poison-after %d, want %d", spec, c.PoisonAfter, want)
		}
	}
	f("", 3, false)
	f(",poison-after=5", 5, false)
	f(",poison-after=0", 0, false)
	f(",poison-after=-1", 0, true)
	f(",poison-after=x", 0, true)
}

// A proxy in front of the upstream resets every stream with INTERNAL_ERROR for a while (its own
// upstream restarting), far longer than PoisonAfter lone sends take: the request, alone on each
// of those streams, is never struck, because nothing at all was delivered meanwhile (no evidence
// that the path works and the request does not); it is retried with backoff and delivered once
// the proxy passes streams again, and nothing is dropped.
func TestStreamInternalOutageDropsNothing(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const ri, outage = 20 * time.Millisecond, 600 * time.Millisecond
		u := newUpstream(t)
		u.window = 8
		a := &answers{}
		var mu sync.Mutex
		var firstReset time.Time
		resets := 0
		u.onStream = func(s *srvStream, g received) error {
			mu.Lock()
			defer mu.Unlock()
			if firstReset.IsZero() {
				firstReset = time.Now()
			}
			if time.Since(firstReset) < outage {
				resets++
				return status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR")
			}
			a.ack(s, g.id)
			return nil
		}
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RetryInitial, cfg.RetryMax = ri, 4*ri
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 1, 1, 10)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered: %v; dropped %v", ok, drops(d))
		}
		a.check(t, []uint64{1})
		if got := drops(d); len(got) != 0 {
			t.Errorf("dropped %v, want nothing", got)
		}
		mu.Lock()
		n := resets
		mu.Unlock()
		if n <= cfg.PoisonAfter {
			t.Errorf("the request was reset %d times alone, want more than poison-after (%d): the outage went untested", n, cfg.PoisonAfter)
		}
		if err := shutdown(t, d, waitFor); err != nil {
			t.Fatal(err)
		}
	})
}

// The poison is the only request (with a spool: no retry budget), so nothing else is delivered
// to show that the path works: the lane probes the upstream before each lone send, the upstream
// answers the probe, and the poison is dropped after PoisonAfter strikes instead of being sent
// again for ever.
func TestStreamLonePoisonDropped(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const after = 3
		u, a := poisonUpstream(t, 8, "b0", nil, nil)
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RetryMaxElapsed = 0
		cfg.RetryInitial, cfg.RetryMax = 5*time.Millisecond, 20*time.Millisecond
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 1, 1, 10)
		if ok := f.waitAll(); len(ok) != 1 || ok[0] {
			t.Fatalf("delivered: %v, want the poison dropped", ok)
		}
		a.check(t, nil)
		if got := drops(d); len(got) != 1 || got[DropStreamPoison] != 1 {
			t.Errorf("dropped %v, want stream_poison: 1 only", got)
		}
		if sent := count(u.tags())["b0"]; sent != 1+after {
			t.Errorf("poison read %d times, want %d: once, then alone once per strike", sent, 1+after)
		}
		u.mu.Lock()
		probes := u.probes
		u.mu.Unlock()
		if probes != after {
			t.Errorf("%d probes, want %d: one before each lone send", probes, after)
		}
		if err := shutdown(t, d, waitFor); err != nil {
			t.Fatal(err)
		}
	})
}
