package reliability

import (
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/faultproxy"
)

const spans = 3000

func pipelineConfig() pipeline.Config {
	c := pipeline.DefaultConfig()
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
	for _, name := range g.names {
		l := map[string]string{"destination": name}
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

// blackHoleConfig is a destination whose every timer is far shorter than the black holes of
// the tests: ack timeout 100ms, backoff up to 100ms, no keepalive pings. Only the retry budget
// (a minute) outlasts them, as it must without a spool; with one there is no budget.
func blackHoleConfig(name, endpoint string) client.Config {
	c := destConfig(name, endpoint)
	c.AckTimeout = 100 * time.Millisecond
	c.KeepaliveTime = 0
	return c
}

// timedOut is how many requests of destination name went unanswered past the ack timeout.
func timedOut(t *testing.T, name string) float64 {
	l := map[string]string{"destination": name}
	return metric(t, "otlpgate_client_ack_timeouts_total", l) +
		metric(t, "otlpgate_client_dropped_requests_total", map[string]string{"destination": name, "reason": "ack_timeout"})
}

// Acknowledgements stop for far longer than every timeout of the destination (at least ten ack
// timeouts, and until requests did time out), then the upstream recovers: "path" black-holes
// every byte between otlpgate and the upstream and recovers by resetting the connection, as a
// middlebox that lost track of the flow does; "server" is an upstream that keeps reading and
// answers nothing, then answers again on the same connection. A request whose answer is overdue
// is sent again on a new stream (the silent one is given up), as often as it takes; after the
// recovery every acknowledged span arrives, nothing is dropped, and duplicates stay within what
// the re-sends can explain.
func TestUpstreamBlackHoledThenRecovering(t *testing.T) {
	for _, where := range []string{"path", "server"} {
		t.Run(where, func(t *testing.T) {
			seen := newSeen()
			up := startUpstream(t, seen, nil)
			px, err := faultproxy.New(up.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			name := "blackhole_" + where
			dc := blackHoleConfig(name, px.Addr())
			g := startGate(t, pipelineConfig(), dc)
			var hole time.Time
			acked := load(t, g.addr, spans, func(i int) {
				switch i {
				case spans / 3:
					hole = time.Now()
					if where == "path" {
						px.SetMode(faultproxy.BlackHole)
					} else {
						up.silent.Store(true)
					}
				case spans / 2:
					// Longer than every timeout, and long enough that requests did time out.
					for deadline := time.Now().Add(30 * time.Second); time.Since(hole) < 10*dc.AckTimeout || timedOut(t, name) < 3; time.Sleep(10 * time.Millisecond) {
						if time.Now().After(deadline) {
							t.Errorf("%v requests timed out in 30s of black hole", timedOut(t, name))
							break
						}
					}
					t.Logf("black hole held for %v (ack timeout %v), %v requests timed out meanwhile",
						time.Since(hole).Round(time.Millisecond), dc.AckTimeout, timedOut(t, name))
					if where == "path" {
						px.SetMode(faultproxy.Pass)
						px.Reset()
					} else {
						up.silent.Store(false)
					}
				}
			})
			g.drained(t, time.Minute)
			s := seen.snapshot()
			dups := checkDelivered(t, acked, s)
			report(t, g, acked, s, dups)
			if len(acked) != spans {
				t.Fatalf("%d of %d acknowledged", len(acked), spans)
			}
			for id := range s {
				if id < 1 || id > spans {
					t.Errorf("span %d arrived but was never sent", id)
				}
			}
			l := map[string]string{"destination": name}
			if n := metric(t, "otlpgate_client_dropped_items_total", l); n != 0 {
				t.Errorf("%v items dropped by the destination", n)
			}
			resent := metric(t, "otlpgate_client_resent_requests_total", l)
			if max := int(resent) * pipelineConfig().BatchMaxItems; dups > max {
				t.Errorf("%d duplicates, more than the %v re-sent requests can hold", dups, resent)
			}
			if n := metric(t, "otlpgate_client_ack_timeouts_total", l); n == 0 {
				t.Error("no ack timeout counted: the black hole never reached the timeout")
			}
			t.Logf("ack timeouts %v, re-sent %v, requests the silent server read and forgot %d",
				metric(t, "otlpgate_client_ack_timeouts_total", l), resent, up.unanswered.Load())
		})
	}
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
