package client

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func unaryConfig(t testing.TB, addr, protocol string, concurrency int) Config {
	c := testConfig(t, addr)
	c.Protocol, c.Mode, c.Concurrency = protocol, ModeUnary, concurrency
	return c
}

// unaryConfigOn is unaryConfig on the gRPC transport tr.
func unaryConfigOn(t testing.TB, tr, addr, protocol string, concurrency int) Config {
	c := unaryConfig(t, addr, protocol, concurrency)
	c.Transport = tr
	return c
}

// One worker: each call is answered before the next starts, so the upstream sees ids 1..n in
// order, never two calls at once.
func TestUnaryOTEPOneInFlight(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 6
		u := newUpstream(t)
		d := startDest(t, unaryConfigOn(t, tr, u.addr, ProtocolOTEP, 1))
		f := newFeeder(t, d)
		f.send(0, n, 3, 1200)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.received()
		var order []uint64
		for _, g := range got {
			order = append(order, g.id)
			if !strings.HasPrefix(g.method, "/otlpgate.otep.v1.UnaryExporter/ExportTraces") {
				t.Errorf("method %s", g.method)
			}
		}
		if !slices.Equal(order, seq(1, n)) {
			t.Errorf("ids in arrival order %v, want 1..%d", order, n)
		}
		checkIDs(t, f, got)
		u.mu.Lock()
		if u.maxInCall != 1 {
			t.Errorf("%d calls in flight at once, want 1", u.maxInCall)
		}
		u.mu.Unlock()
	})
}

// v1 with three workers and zstd: the upstream holds calls until three are in flight at once,
// never sees more, and receives each batch's bytes exactly, compressed on the wire.
func TestUnaryV1Concurrency(t *testing.T) {
	const n, workers = 9, 3
	u := newUpstream(t)
	u.v1Rejected = 2 // of the two spans of each batch
	gate := make(chan struct{})
	var tenants []string
	u.onUnary = func(g received) (otepv1.ResultCode, error) {
		<-gate
		return 0, nil
	}
	cfg := unaryConfig(t, u.addr, ProtocolV1, workers)
	cfg.Compression = "zstd"
	cfg.Headers = map[string]string{"x-tenant": "t1"}
	u.srvCtxHook = func(md metadata.MD) {
		u.mu.Lock()
		tenants = append(tenants, strings.Join(md.Get("x-tenant"), ","))
		u.mu.Unlock()
	}
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, n, 2, 300)
	u.waitUntil("three calls at once", func() bool { return u.inCall == workers })
	close(gate)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	got := u.received()
	if c := count(u.tags()); len(c) != n || slices.ContainsFunc(tagList(0, n-1), func(tag string) bool { return c[tag] != 1 }) {
		t.Errorf("batches received %v, want b0..b%d once each", c, n-1)
	}
	for _, g := range got {
		if g.method != "/opentelemetry.proto.collector.trace.v1.TraceService/Export" {
			t.Errorf("method %s", g.method)
		}
		if !bytes.Equal(g.body, f.body(g.tag)) {
			t.Errorf("%s: body differs", g.tag)
		}
	}
	u.mu.Lock()
	if u.maxInCall != workers {
		t.Errorf("%d calls in flight at most, want %d", u.maxInCall, workers)
	}
	if len(tenants) != n || len(u.compressed) != n {
		t.Errorf("saw %d calls' metadata and %d calls' encodings, want %d", len(tenants), len(u.compressed), n)
	}
	for i := range tenants {
		if tenants[i] != "t1" || u.compressed[i] != "zstd" {
			t.Errorf("call %d: x-tenant %q, grpc-encoding %q; want t1, zstd", i, tenants[i], u.compressed[i])
		}
	}
	u.mu.Unlock()
	if v := value(d.m.partialRejected); v != 2*n {
		t.Errorf("partially rejected %d, want %d", v, 2*n)
	}
}

// Result codes and statuses of unary calls.
func TestUnaryResultCodes(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		seen := map[string]int{}
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			u.mu.Lock()
			seen[g.tag]++
			k := seen[g.tag]
			u.mu.Unlock()
			switch g.tag {
			case "b1":
				return otepv1.ResultCode_FailedNoneRetryable, nil
			case "b2":
				if k == 1 {
					return otepv1.ResultCode_FailedRetryable, nil
				}
			case "b3":
				return 0, status.Error(codes.InvalidArgument, "bad")
			case "b4":
				if k == 1 {
					return 0, status.Error(codes.Unavailable, "blip")
				}
			case "b5":
				return 0, status.Error(codes.ResourceExhausted, "too big, no RetryInfo")
			}
			return otepv1.ResultCode_Success, nil
		}
		d := startDest(t, unaryConfigOn(t, tr, u.addr, ProtocolOTEP, 1))
		f := newFeeder(t, d)
		f.send(0, 6, 1, 10)
		if got, want := f.waitAll(), []bool{true, false, true, false, true, false}; !slices.Equal(got, want) {
			t.Fatalf("delivered %v, want %v", got, want)
		}
		want := map[string]int{"b0": 1, "b1": 1, "b2": 2, "b3": 1, "b4": 2, "b5": 1}
		if c := count(u.tags()); !mapsEqual(c, want) {
			t.Errorf("calls per batch %v, want %v", c, want)
		}
		checkIDs(t, f, u.received())
		if r, x := value(d.m.retried[RetryFailed]), value(d.m.dropped[DropRejected]); r != 2 || x != 3 {
			t.Errorf("retried %d, rejected %d; want 2, 3", r, x)
		}
	})
}

// A call not answered within AckTimeout is cancelled and retried after the backoff; the
// second call is answered and nothing is dropped.
func TestUnaryAckTimeout(t *testing.T) {
	u := newUpstream(t)
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int32
	u.onUnary = func(g received) (otepv1.ResultCode, error) {
		if g.tag == "b1" && calls.Add(1) == 1 {
			<-release // the first call is never answered in time
		}
		return otepv1.ResultCode_Success, nil
	}
	cfg := unaryConfig(t, u.addr, ProtocolV1, 1)
	cfg.AckTimeout = time.Second
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 3, 1, 10)
	if got, want := f.waitAll(), []bool{true, true, true}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	if c := count(u.tags()); c["b0"] != 1 || c["b1"] != 2 || c["b2"] != 1 {
		t.Errorf("calls per batch %v, want b1 twice, the others once", c)
	}
	if r, a := value(d.m.retried[RetryAckTimeout]), value(d.m.ackTimeouts); r != 1 || a != 1 {
		t.Errorf("retried after a timeout %d, ack timeouts %d; want 1, 1", r, a)
	}
	for reason, c := range d.m.dropped {
		if v := value(c); v != 0 {
			t.Errorf("dropped %d with reason %s", v, DropReason(reason))
		}
	}
}

// The ack timeout of a unary call runs from when the transport took the request: calls that
// first wait for a stream the server allows (HTTP/2 max concurrent streams 1, five workers, each
// call answered after 400ms) are not timed out for that wait, though the last one finishes 2s
// after it began, past the 1.5s ack timeout. On both gRPC transports: the own one honours the
// server's SETTINGS_MAX_CONCURRENT_STREAMS by making calls wait for a free stream.
func TestUnaryAckTimeoutStartsAtSend(t *testing.T) {
	transports(t, func(t *testing.T, transport string) {
		const calls = 5
		u := newUpstream(t, grpc.MaxConcurrentStreams(1))
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			time.Sleep(400 * time.Millisecond)
			return otepv1.ResultCode_Success, nil
		}
		cfg := unaryConfig(t, u.addr, ProtocolV1, calls)
		cfg.AckTimeout = 1500 * time.Millisecond
		cfg.Transport = transport
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, calls, 1, 10)
		if got := f.waitAll(); !allTrue(got) {
			t.Fatalf("delivered %v, want all", got)
		}
		if c := count(u.tags()); len(c) != calls || len(u.tags()) != calls {
			t.Errorf("calls per batch %v, want one each", c)
		}
		u.mu.Lock()
		most := u.maxInCall
		u.mu.Unlock()
		if most != 1 {
			t.Errorf("%d calls at once at the upstream, want 1 (the others waited for a stream)", most)
		}
		if a, r := value(d.m.ackTimeouts)+value(d.m.dropped[DropAckTimeout]), value(d.m.retried[RetryFailed]); a != 0 || r != 0 {
			t.Errorf("ack timeouts %d, retried %d; want 0, 0", a, r)
		}
	})
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A request whose call failed to reach the upstream (UNAVAILABLE) waits out its backoff (an
// hour here) only until the upstream's next success: then it goes at once, ahead of what comes
// after. Released once: failing again, it sleeps its backoff out whatever else succeeds. One
// worker, so that the order of the calls is the proof: a request released (due at once) goes
// ahead of one sent after it.
func TestUnaryOutageRetryReleasedBySuccess(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		var mu sync.Mutex
		seen := map[string]int{}
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			mu.Lock()
			seen[g.tag]++
			n := seen[g.tag]
			mu.Unlock()
			if g.tag == "b0" && n == 1 || g.tag == "b2" && n <= 2 {
				return 0, status.Error(codes.Unavailable, "connection refused, say")
			}
			return 0, nil
		}
		cfg := unaryConfigOn(t, tr, u.addr, ProtocolV1, 1)
		cfg.RetryInitial, cfg.RetryMax, cfg.RetryMaxElapsed = time.Hour, time.Hour, 0
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 1, 1, 10)
		retried := func(what string, n int) {
			t.Helper()
			deadline := time.Now().Add(waitFor)
			for value(d.m.retried[RetryFailed]) != n {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s", what)
				}
				time.Sleep(time.Millisecond)
			}
		}
		retried("b0's first call to fail", 1)
		f.send(1, 1, 1, 10)
		if got := f.waitAll(); !allTrue(got) {
			t.Fatalf("delivered %v, want both", got)
		}
		if got := u.tags(); !slices.Equal(got, []string{"b0", "b1", "b0"}) {
			t.Errorf("calls %v, want b0 (refused), b1, then b0 again, released by b1's success", got)
		}
		// b2 fails, is released by b3's success, fails again: its next backoff is slept out.
		f.send(2, 1, 1, 10)
		retried("b2's first call to fail", 2)
		f.send(3, 1, 1, 10)
		if !f.wait(3) {
			t.Fatal("b3 not delivered")
		}
		retried("b2's second call to fail", 3)
		f.send(4, 1, 1, 10)
		if !f.wait(4) {
			t.Fatal("b4 not delivered")
		}
		// Had b4's success released b2 again, b2 would be due before b5 is sent, and called
		// ahead of it.
		f.send(5, 1, 1, 10)
		if !f.wait(5) {
			t.Fatal("b5 not delivered")
		}
		mu.Lock()
		n := seen["b2"]
		mu.Unlock()
		if n != 2 {
			t.Errorf("b2 called %d times, want 2: released once, then its backoff", n)
		}
		if got := u.tags(); !slices.Equal(got, []string{"b0", "b1", "b0", "b2", "b3", "b2", "b4", "b5"}) {
			t.Errorf("calls %v, want b0 b1 b0 b2 b3 b2 b4 b5", got)
		}
		// b2 still waits out its hour: the shutdown's deadline drops it, counted.
		if err := shutdown(t, d, 50*time.Millisecond); err == nil {
			t.Error("the shutdown left b2 in its backoff without a word")
		}
	})
}
