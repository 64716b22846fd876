package l7lb

import (
	"fmt"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
)

// transports are otlpgate's gRPC transports: the gateways' intake (-grpc.transport) and the
// edge's destination (transport=) take the same names.
var transports = []string{client.TransportGRPCGo, client.TransportOtlpgate}

// unaryEdgeConfig is a v1 unary destination to addr on the gRPC transport tr.
func unaryEdgeConfig(name, addr, tr string) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint = name, addr
	c.Protocol, c.Mode, c.Transport = client.ProtocolV1, client.ModeUnary, tr
	c.Concurrency = 4
	c.RetryInitial, c.RetryMax, c.RetryMaxElapsed = 10*time.Millisecond, 200*time.Millisecond, 2*time.Minute
	c.AckTimeout = 30 * time.Second
	return c
}

// v1 unary Export calls through each balancer, for each pair of transports (the edge's
// destination, the gateways' intake): the balancer spreads the calls over both gateways, and
// a reload of the balancer mid-run, whose old nginx workers or old HAProxy process end the
// edge's connection with a GOAWAY while calls are on it, loses nothing: every admitted span
// arrives, and any duplicate is a request counted as re-sent.
func TestUnaryTransports(t *testing.T) {
	for ki, k := range kinds {
		for _, edgeTr := range transports {
			for _, gwTr := range transports {
				t.Run(fmt.Sprintf("%s/edge=%s/gateways=%s", k.name, edgeTr, gwTr), func(t *testing.T) {
					// Each pair runs on gateways, a balancer and an edge of its own, and spends
					// its time waiting between requests: the pairs run side by side.
					t.Parallel()
					gws := []*gateway{startGatewayOn(t, "gw1", 0, gwTr), startGatewayOn(t, "gw2", 0, gwTr)}
					lb := startBalancer(t, ki, addrs(gws...), Options{})
					name := destName(t)
					e := startEdge(t, unaryEdgeConfig(name, lb.Addr(), edgeTr))
					start := time.Now()
					reloaded := false
					admitted := load(t, e, 1, 1500*time.Millisecond, time.Millisecond, func(el time.Duration) {
						if !reloaded && el >= 600*time.Millisecond {
							if err := lb.SetBackends(addrs(gws...)); err != nil {
								t.Fatal(err)
							}
							reloaded = true
						}
					})
					dups := settle(t, admitted, gws...)
					sh := shares(start, gws...)
					t.Logf("%s, edge on %s, gateways on %s, a reload mid-run: %d spans, shares %.2f / %.2f, %d duplicates, %v requests re-sent, %v unprocessed sent again",
						k.name, edgeTr, gwTr, len(admitted), sh[0], sh[1], dups,
						counter(t, "otlpgate_client_resent_requests_total", "destination", name),
						counter(t, "otlpgate_client_unprocessed_requests_total", "destination", name))
					for i, s := range sh {
						if s < 0.2 {
							t.Errorf("gateway %d took %.2f of the calls; the balancer should spread unary calls", i+1, s)
						}
					}
					checkDups(t, name, dups)
				})
			}
		}
	}
}
