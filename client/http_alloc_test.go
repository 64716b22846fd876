//go:build !race

package client

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// A request's whole OTLP/HTTP cycle — admitted, queued, compressed, POSTed over a kept-alive
// loopback connection, answered, its answer read and the batch finished — allocates nothing
// once the pools are warm, with every compression. The upstream runs in this process, so
// its allocations would count too: fasthttp's server makes none per request either.
func TestHTTPSendZeroAlloc(t *testing.T) {
	for _, comp := range []string{"none", "gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			p, d, w := newHTTPCycle(t, comp)
			body := traceBody("z", 4, 300)
			timer := stoppedTimer()
			acked := value(d.m.ackedRequests)
			allocs := testing.AllocsPerRun(500, func() {
				if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
					panic(err)
				}
				w.call(d.next(fastpath.Traces, timer))
			})
			if got := value(d.m.ackedRequests) - acked; got != 501 {
				t.Fatalf("acknowledged %d of 501", got)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per request", allocs)
			}
		})
	}
}
