package process

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// BenchmarkRouteSplit is the cost per request of routing by resource attribute: each entry's
// Resource read, the entries copied into their pieces, the pieces' items counted.
func BenchmarkRouteSplit(b *testing.B) {
	rt := newRouter(b, "resource:service.name=checkout", "resource:service.name=cart|pay*", "")
	for _, c := range []struct {
		name string
		req  []byte
	}{
		{"mixed-5x20spans", routedRequest(b, fastpath.Traces, 20, "checkout", "cart", "payments", "search", "checkout")},
		{"oneway-5x20spans", routedRequest(b, fastpath.Traces, 20, "search", "ads", "web", "api", "db")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.req)))
			for b.Loop() {
				s, err := split(rt, fastpath.Traces, c.req, 100, fastpath.LayoutV1)
				if err != nil {
					b.Fatal(err)
				}
				s.Release()
			}
		})
	}
}
