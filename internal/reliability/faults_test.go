package reliability

import (
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/faultproxy"
)

const spans = 3000

func pipelineConfig() fastpath.Config {
	c := fastpath.DefaultConfig()
	c.QueueMaxBytes = 4 << 20
	c.BatchMaxBytes = 64 << 10
	c.BatchMaxAge = 2 * time.Millisecond
	c.BatchMaxItems = 10 // hundreds of upstream requests per scenario, so that faults hit some
	return c
}

// report logs the figures RELIABILITY.md quotes. Destination names are unique per test, so the
// counters are this test's own.
func report(t *testing.T, g *gate, acked map[uint64]bool, seen map[uint64]int, dups int) {
	var resent, retried, throttled float64
	for _, d := range g.dests {
		l := map[string]string{"destination": d.Name()}
		resent += metric(t, "otlpgate_client_resent_requests_total", l)
		retried += metric(t, "otlpgate_client_retried_requests_total", l)
		throttled += metric(t, "otlpgate_client_throttles_total", l)
	}
	t.Logf("acknowledged %d, delivered %d distinct, duplicates %d, queue high-water %d of %d bytes, upstream requests re-sent %v, retried %v, throttled %v",
		len(acked), len(seen), dups, g.peak.Load(), g.p.Config().QueueMaxBytes, resent, retried, throttled)
	if g.peak.Load() > g.p.Config().QueueMaxBytes {
		t.Fatalf("queued bytes reached %d > bound %d", g.peak.Load(), g.p.Config().QueueMaxBytes)
	}
}

// The upstream is killed mid-stream and a new one starts: requests pending on the broken
// stream are re-sent on the new one; nothing acknowledged is lost.
func TestUpstreamKilledAndRestarted(t *testing.T) {
	seen := newSeen()
	up := startUpstream(t, seen, nil)
	px, err := faultproxy.New(up.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	g := startGate(t, pipelineConfig(), destConfig("restart", px.Addr()))
	acked := load(t, g.addr, spans, func(i int) {
		if i == spans/2 {
			up.kill()
			next := startUpstream(t, seen, nil)
			px.SetTarget(next.addr())
			px.Reset()
		}
	})
	g.drained(t, time.Minute)
	s := seen.snapshot()
	dups := checkDelivered(t, acked, s)
	report(t, g, acked, s, dups)
	if len(acked) != spans {
		t.Fatalf("%d of %d acknowledged", len(acked), spans)
	}
}

// The path black-holes every byte for a while, then recovers: the broken connection is
// replaced and what was pending is re-sent.
func TestUpstreamBlackHoledThenRecovering(t *testing.T) {
	seen := newSeen()
	up := startUpstream(t, seen, nil)
	px, err := faultproxy.New(up.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	g := startGate(t, pipelineConfig(), destConfig("blackhole", px.Addr()))
	acked := load(t, g.addr, spans, func(i int) {
		switch i {
		case spans / 3:
			px.SetMode(faultproxy.BlackHole)
		case spans / 2:
			time.Sleep(300 * time.Millisecond) // acks stop; requests pile up
			px.SetMode(faultproxy.Pass)
			px.Reset() // what a middlebox does to a flow it lost track of
		}
	})
	g.drained(t, time.Minute)
	s := seen.snapshot()
	report(t, g, acked, s, checkDelivered(t, acked, s))
}

// The upstream answers FailedRetryable to 30% of requests: those are retried until accepted.
func TestUpstreamRefusesThirtyPercent(t *testing.T) {
	seen := newSeen()
	up := startUpstream(t, seen, func(u *upstream) { u.failPct = 30 })
	g := startGate(t, pipelineConfig(), destConfig("flaky", up.addr()))
	acked := load(t, g.addr, spans, nil)
	g.drained(t, time.Minute)
	s := seen.snapshot()
	report(t, g, acked, s, checkDelivered(t, acked, s))
	if r := metric(t, "otlpgate_client_retried_requests_total", map[string]string{"destination": "flaky"}); r == 0 {
		t.Fatal("no retry counted though 30% of answers were FailedRetryable")
	}
}

// The upstream throttles with UNAVAILABLE + RetryInfo: the destination pauses and resumes.
func TestUpstreamThrottles(t *testing.T) {
	seen := newSeen()
	up := startUpstream(t, seen, func(u *upstream) { u.throttleEvery, u.throttleFor = 40, 20*time.Millisecond })
	g := startGate(t, pipelineConfig(), destConfig("throttled", up.addr()))
	acked := load(t, g.addr, spans, nil)
	g.drained(t, time.Minute)
	s := seen.snapshot()
	report(t, g, acked, s, checkDelivered(t, acked, s))
	if n := metric(t, "otlpgate_client_throttles_total", map[string]string{"destination": "throttled"}); n == 0 {
		t.Fatal("no throttle counted")
	}
}

// Two destinations, one dead for the whole run: the live one receives everything, the dead one
// drops after its retry budget and counts it; the client is never stalled.
func TestOneOfTwoDestinationsDead(t *testing.T) {
	seen := newSeen()
	up := startUpstream(t, seen, nil)
	dead, err := faultproxy.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	dead.SetMode(faultproxy.Refuse)
	dc := destConfig("dead", dead.Addr())
	dc.RetryMaxElapsed = 200 * time.Millisecond
	dc.QueueBytes = 1 << 20 // below the pipeline's bound, so a dead destination cannot hold all of it
	g := startGate(t, pipelineConfig(), destConfig("live", up.addr()), dc)
	acked := load(t, g.addr, spans, nil)
	g.drained(t, time.Minute)
	s := seen.snapshot()
	report(t, g, acked, s, checkDelivered(t, acked, s))
	if len(acked) != spans {
		t.Fatalf("%d of %d acknowledged: the dead destination stalled the client", len(acked), spans)
	}
	dropped := metric(t, "otlpgate_client_dropped_items_total", map[string]string{"destination": "dead"})
	if dropped == 0 {
		t.Fatal("the dead destination counted no dropped items")
	}
	t.Logf("dead destination dropped %v items", dropped)
}
