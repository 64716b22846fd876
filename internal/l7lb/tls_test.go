package l7lb

import (
	"fmt"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/testkit"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// Each balancer speaks TLS to the gateways (nginx grpc_pass grpcs://, HAProxy ssl alpn h2 on
// each server, both verifying the gateways' certificate), whose gRPC listener serves only TLS
// with ALPN h2, on each of otlpgate's server transports; the edge, on the own client, sends v1
// unary calls and OTEP streams (re-balanced every period) to the balancer in the clear. The
// balancer spreads the calls and streams over both gateways, and every admitted span arrives,
// with no duplicate and no request sent again: what reached a gateway crossed a TLS connection
// the balancer opened, since the gateways take no other.
func TestGatewaysBehindTLS(t *testing.T) {
	cert, key := testkit.SelfSigned(t, t.TempDir())
	for ki, k := range kinds {
		for _, gwTr := range transports {
			for _, mode := range []string{client.ModeUnary, client.ModeStream} {
				t.Run(fmt.Sprintf("%s/gateways=%s/%s", k.name, gwTr, mode), func(t *testing.T) {
					// Each cell has gateways, a balancer and an edge of its own, and spends its
					// time waiting between requests: the cells run side by side.
					t.Parallel()
					tlsOn := func(c *grpcserver.Config) { c.Transport, c.TLSCert, c.TLSKey = gwTr, cert, key }
					gws := []*gateway{startGatewayWith(t, "gw1", tlsOn), startGatewayWith(t, "gw2", tlsOn)}
					lb := startBalancer(t, ki, addrs(gws...), Options{GatewayCA: cert})
					name := destName(t)
					cfg := unaryEdgeConfig(name, lb.Addr(), client.TransportOtlpgate)
					if mode == client.ModeStream {
						cfg = edgeConfig(name, lb.Addr(), 2, period)
						cfg.Transport = client.TransportOtlpgate
					}
					e := startEdge(t, cfg)
					start := time.Now()
					admitted := load(t, e, 1, time.Second, time.Millisecond, nil)
					dups := settle(t, admitted, gws...)
					sh := shares(start, gws...)
					resent := counter(t, "otlpgate_client_resent_requests_total", "destination", name)
					retried := counter(t, "otlpgate_client_retried_requests_total", "destination", name)
					t.Logf("%s speaking TLS to gateways on %s, edge %s: %d spans, shares %.2f / %.2f, %d duplicates, %v re-sent, %v retried",
						k.name, gwTr, mode, len(admitted), sh[0], sh[1], dups, resent, retried)
					for i, s := range sh {
						if s < 0.2 {
							t.Errorf("gateway %d took %.2f of the traffic; the balancer should spread it", i+1, s)
						}
					}
					if dups != 0 || resent != 0 || retried != 0 {
						t.Errorf("%d duplicate spans, %v requests re-sent, %v retried; with nothing in the way, want none", dups, resent, retried)
					}
				})
			}
		}
	}
}
