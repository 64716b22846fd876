package client

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// With streams=1, window=1 and a new stream for every request (re-balancing after each), at
// most one request is ever unanswered across all streams: the pending request of a draining
// stream holds the signal's in-flight token until it is answered.
func TestMaxInFlightAcrossRebalancing(t *testing.T) {
	u := newUpstream(t)
	var pending, peak atomic.Int32
	var wg sync.WaitGroup
	u.onStream = func(s *srvStream, g received) error {
		if n := pending.Add(1); n > peak.Load() {
			peak.Store(n)
		}
		wg.Add(1)
		go func() { // answer a moment later, so an overlapping send would be seen
			defer wg.Done()
			time.Sleep(2 * time.Millisecond)
			pending.Add(-1)
			s.ack(g.id, otepv1.ResultCode_Success)
		}()
		return nil
	}
	cfg := testConfig(t, u.addr)
	cfg.Streams, cfg.Window, cfg.RebalanceRequests = 1, 1, 1
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(1, 20, 1, 100)
	for i, ok := range f.waitAll() {
		if !ok {
			t.Fatalf("batch %d not delivered", i)
		}
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d requests were unanswered at once, want 1", p)
	}
	if n := len(u.received()); n != 20 {
		t.Fatalf("upstream got %d requests, want 20", n)
	}
	u.mu.Lock()
	streams := len(u.streams)
	u.mu.Unlock()
	if streams < 20 {
		t.Fatalf("%d streams for 20 requests: re-balancing after every request did not happen", streams)
	}
}

func TestParseMaxInFlight(t *testing.T) {
	c, err := ParseDest("name=a,endpoint=x:1,max-in-flight=5", DefaultConfig())
	if err != nil || c.MaxInFlight != 5 {
		t.Fatalf("%+v, %v", c.MaxInFlight, err)
	}
	if _, err := ParseDest("name=a,endpoint=x:1,max-in-flight=-1", DefaultConfig()); err == nil {
		t.Fatal("negative max-in-flight accepted")
	}
}
