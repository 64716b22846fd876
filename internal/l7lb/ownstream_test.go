package l7lb

import (
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// OTEP streams of an edge on otlpgate's own gRPC client (transport=otlpgate) through each
// balancer, re-balanced every period, with a reload of the balancer mid-run (its old workers
// or process end the edge's connection with a GOAWAY while streams are on it): both gateways
// share the streams, every admitted span arrives, and any duplicate is a request counted as
// re-sent.
func TestOwnTransportStreamsRebalance(t *testing.T) {
	for ki, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			gws := []*gateway{startGateway(t, "gw1", 0), startGateway(t, "gw2", 0)}
			lb := startBalancer(t, ki, addrs(gws...), Options{})
			name := destName(t)
			cfg := edgeConfig(name, lb.Addr(), 2, period)
			cfg.Transport = client.TransportOtlpgate
			e := startEdge(t, cfg)
			start := time.Now()
			reloaded := false
			admitted := load(t, e, 1, 3*time.Second, time.Millisecond, func(el time.Duration) {
				if !reloaded && el >= 1500*time.Millisecond {
					if err := lb.SetBackends(addrs(gws...)); err != nil {
						t.Fatal(err)
					}
					reloaded = true
				}
			})
			dups := settle(t, admitted, gws...)
			sh := shares(start, gws...)
			t.Logf("%s, own transport, rebalance every %v, a reload mid-run: %d spans, shares %.2f / %.2f, %d duplicates, %v requests re-sent",
				k.name, period, len(admitted), sh[0], sh[1], dups, counter(t, "otlpgate_client_resent_requests_total", "destination", name))
			for i, s := range sh {
				if s < 0.2 {
					t.Errorf("gateway %d took %.2f of the traffic; with re-balancing both should take a fair share", i+1, s)
				}
			}
			checkDups(t, name, dups)
		})
	}
}

// nginx's default client_max_body_size (1m) on the own transport's streams: with
// rebalance-bytes off, nginx resets a stream mid-way once it carried 1 MiB, and its pending
// requests go again on a new stream; nothing is lost.
func TestOwnTransportNginxBodyLimitReset(t *testing.T) {
	pad := strings.Repeat("x", 1024)
	gws := []*gateway{startGateway(t, "gw1", 0), startGateway(t, "gw2", 0)}
	lb := startBalancer(t, 0, addrs(gws...), Options{Replace: map[string]string{
		"client_max_body_size 0;": "client_max_body_size 1m;"}})
	name := destName(t)
	cfg := edgeConfig(name, lb.Addr(), 1, 0)
	cfg.Transport = client.TransportOtlpgate
	cfg.RebalanceBytes = 0
	e := startEdge(t, cfg)
	var admitted []uint64
	for id := uint64(1); id <= 3000; id++ {
		for tries := 0; e.p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: paddedSpanBody(id, pad), Items: 1}) != nil; tries++ {
			if tries > 1000 {
				t.Fatalf("span %d not admitted", id)
			}
			time.Sleep(time.Millisecond)
		}
		admitted = append(admitted, id)
		if id%100 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	dups := settle(t, admitted, gws...)
	resent := counter(t, "otlpgate_client_resent_requests_total", "destination", name)
	t.Logf("own transport, rebalance-bytes off: %d spans of 1KiB, %v requests re-sent, %d duplicates", len(admitted), resent, dups)
	if resent == 0 {
		t.Errorf("no stream was reset: the test no longer shows nginx's limit")
	}
	checkDups(t, name, dups)
}
