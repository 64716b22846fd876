package pipeline

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// BenchmarkAdmitRoutes is a mixed request's whole admission with routes: split, pieces into
// their batches, seal and fan-out to three destinations, against the same request without.
func BenchmarkAdmitRoutes(b *testing.B) {
	req := routedRequest(b, fastpath.Traces, 20, "checkout", "cart", "payments", "search", "checkout")
	for _, routed := range []bool{false, true} {
		name := "no-routes"
		cfg := testConfig()
		cfg.BatchMaxBytes = 1 << 20
		cfg.BatchMaxItems = 1000
		if routed {
			name = "routes"
			cfg.Router = newRouter(b, "resource:service.name=checkout", "resource:service.name=cart|pay*", "")
		}
		b.Run(name, func(b *testing.B) {
			p, err := New(cfg, []Destination{sink{}, sink{}, sink{}})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 100}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
