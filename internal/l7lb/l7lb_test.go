package l7lb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// The rebalance period of the tests: short, so that a run of a few seconds spans many periods.
const period = 250 * time.Millisecond

func addrs(gws ...*gateway) []string {
	var out []string
	for _, g := range gws {
		out = append(out, g.addr)
	}
	return out
}

func destName(t *testing.T) string {
	return fmt.Sprintf("l7lb-%d", edgeSeq.Add(1))
}

// checkDups asserts that every duplicate span is accounted for by a re-sent request (a batch
// holds at most 16 spans here).
func checkDups(t *testing.T, name string, dups int) {
	t.Helper()
	resent := counter(t, "otlpgate_client_resent_requests_total", "destination", name)
	if float64(dups) > 16*resent {
		t.Errorf("%d duplicate spans, but only %v requests were counted as re-sent", dups, resent)
	}
}

// With re-balancing on, an edge's streams spread over both gateways, and every admitted span
// arrives.
func TestRebalanceSpreads(t *testing.T) {
	for ki, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			gws := []*gateway{startGateway(t, "gw1", 0), startGateway(t, "gw2", 0)}
			lb := startBalancer(t, ki, addrs(gws...), Options{})
			name := destName(t)
			e := startEdge(t, edgeConfig(name, lb.Addr(), 2, period))
			start := time.Now()
			admitted := load(t, e, 1, 3*time.Second, time.Millisecond, nil)
			dups := settle(t, admitted, gws...)
			sh := shares(start, gws...)
			t.Logf("%s, rebalance every %v: %d spans, shares %.2f / %.2f, %d duplicates", k.name, period, len(admitted), sh[0], sh[1], dups)
			for i, s := range sh {
				if s < 0.2 {
					t.Errorf("gateway %d took %.2f of the traffic; with re-balancing both should take a fair share", i+1, s)
				}
			}
			checkDups(t, name, dups)
		})
	}
}

// Without re-balancing, one stream's traffic stays on the gateway it was opened to: the
// contrast with TestRebalanceSpreads.
func TestNoRebalancePins(t *testing.T) {
	for ki, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			gws := []*gateway{startGateway(t, "gw1", 0), startGateway(t, "gw2", 0)}
			lb := startBalancer(t, ki, addrs(gws...), Options{})
			name := destName(t)
			e := startEdge(t, edgeConfig(name, lb.Addr(), 1, 0))
			start := time.Now()
			admitted := load(t, e, 1, 2*time.Second, time.Millisecond, nil)
			dups := settle(t, admitted, gws...)
			sh := shares(start, gws...)
			t.Logf("%s, no re-balancing: %d spans, shares %.2f / %.2f", k.name, len(admitted), sh[0], sh[1])
			if sh[0] != 1 && sh[1] != 1 {
				t.Errorf("one stream's traffic was split %.2f / %.2f; without re-balancing it should stay on one gateway", sh[0], sh[1])
			}
			checkDups(t, name, dups)
		})
	}
}

// A gateway added to the balancer by a reload mid-run takes a fair share of the new streams
// within two rebalance periods, and nothing is lost across the reload.
func TestReloadAddsGateway(t *testing.T) {
	for ki, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			gws := []*gateway{startGateway(t, "gw1", 0), startGateway(t, "gw2", 0), startGateway(t, "gw3", 0)}
			lb := startBalancer(t, ki, addrs(gws[:2]...), Options{})
			name := destName(t)
			e := startEdge(t, edgeConfig(name, lb.Addr(), 2, period))
			var reloaded time.Time
			admitted := load(t, e, 1, 4*time.Second, time.Millisecond, func(el time.Duration) {
				if reloaded.IsZero() && el >= time.Second {
					if err := lb.SetBackends(addrs(gws...)); err != nil {
						t.Fatal(err)
					}
					reloaded = time.Now()
				}
			})
			dups := settle(t, admitted, gws...)
			sh := shares(reloaded.Add(2*period), gws...)
			t.Logf("%s, reload adding gw3: %d spans, shares after reload + 2 periods %.2f / %.2f / %.2f, %d duplicates",
				k.name, len(admitted), sh[0], sh[1], sh[2], dups)
			if sh[2] < 0.15 {
				t.Errorf("the gateway added by the reload took %.2f of the traffic after two rebalance periods", sh[2])
			}
			checkDups(t, name, dups)
		})
	}
}

// Gateways that end streams at -grpc.stream.max-age re-balance an edge that never re-opens by
// itself: it re-opens each ended stream through the balancer, without loss, for each pair of
// gRPC transports (the edge's destination, the gateways' intake).
func TestServerMaxAge(t *testing.T) {
	for ki, k := range kinds {
		for _, pair := range [][2]string{{"grpc-go", "grpc-go"}, {"otlpgate", "grpc-go"}, {"grpc-go", "otlpgate"}, {"otlpgate", "otlpgate"}} {
			tr, gwTr := pair[0], pair[1]
			t.Run(k.name+"/edge="+tr+"/gateways="+gwTr, func(t *testing.T) {
				// Each pair runs on gateways, a balancer and an edge of its own, and spends its
				// seconds waiting between requests: the pairs run side by side.
				t.Parallel()
				gws := []*gateway{startGatewayOn(t, "gw1", period, gwTr), startGatewayOn(t, "gw2", period, gwTr)}
				lb := startBalancer(t, ki, addrs(gws...), Options{})
				name := destName(t)
				cfg := edgeConfig(name, lb.Addr(), 2, 0)
				cfg.Transport = tr
				e := startEdge(t, cfg)
				start := time.Now()
				admitted := load(t, e, 1, 3*time.Second, time.Millisecond, nil)
				dups := settle(t, admitted, gws...)
				sh := shares(start, gws...)
				t.Logf("%s, gateways end streams every %v: %d spans, shares %.2f / %.2f, %d duplicates", k.name+" (edge on "+tr+", gateways on "+gwTr+")", period, len(admitted), sh[0], sh[1], dups)
				for i, s := range sh {
					if s < 0.2 {
						t.Errorf("gateway %d took %.2f of the traffic", i+1, s)
					}
				}
				checkDups(t, name, dups)
			})
		}
	}
}

// nginx counts a whole gRPC stream as one request body: with its default client_max_body_size
// (1m) a stream that carries more is reset mid-way and its pending requests are sent again.
// rebalance-bytes (default 960KiB) re-opens streams before that; with it off, the resets show,
// on the gateways' streams too, whichever gRPC transport serves them.
func TestNginxDefaultBodyLimit(t *testing.T) {
	pad := strings.Repeat("x", 1024)
	body := func(id uint64) []byte { return paddedSpanBody(id, pad) }
	for _, gwTr := range transports {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("gateways=%s/rebalance-bytes=%v", gwTr, on), func(t *testing.T) {
				gws := []*gateway{startGatewayOn(t, "gw1", 0, gwTr), startGatewayOn(t, "gw2", 0, gwTr)}
				lb := startBalancer(t, 0, addrs(gws...), Options{Replace: map[string]string{
					"client_max_body_size 0;": "client_max_body_size 1m;"}})
				name := destName(t)
				cfg := edgeConfig(name, lb.Addr(), 1, 0)
				if !on {
					cfg.RebalanceBytes = 0
				}
				e := startEdge(t, cfg)
				// 3,000 spans of 1KiB, about 3MiB through one stream: three times nginx's default.
				var admitted []uint64
				for id := uint64(1); id <= 3000; id++ {
					for tries := 0; e.p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body(id), Items: 1}) != nil; tries++ {
						if tries > 1000 {
							t.Fatalf("span %d not admitted", id)
						}
						time.Sleep(time.Millisecond)
					}
					admitted = append(admitted, id)
					if id%100 == 0 {
						time.Sleep(5 * time.Millisecond) // spread over many batches and a few seconds
					}
				}
				dups := settle(t, admitted, gws...)
				resent := counter(t, "otlpgate_client_resent_requests_total", "destination", name)
				byBytes := counter(t, "otlpgate_client_streams_ended_total", "destination", name)
				t.Logf("gateways on %s, rebalance-bytes on=%v: %d spans of 1KiB, %v requests re-sent, %d duplicates, %v stream ends", gwTr, on, len(admitted), resent, dups, byBytes)
				if on && (resent != 0 || dups != 0) {
					t.Errorf("with rebalance-bytes, nginx's default body limit still reset streams: %v re-sent, %d duplicates", resent, dups)
				}
				if !on && resent == 0 {
					t.Errorf("without rebalance-bytes, no stream was reset: the test no longer shows nginx's limit")
				}
				checkDups(t, name, dups)
			})
		}
	}
}
