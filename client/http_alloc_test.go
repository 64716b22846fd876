//go:build !race

package client

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath"
)

// newHTTPCycle is a destination for a loopback upstream that answers every POST with 200 and
// a small protobuf body (a partial success of 0 items with a message), and a pipeline that
// seals each request as its own batch. The destination's workers are not started: the caller
// plays one, taking each request from the queue and calling it.
func newHTTPCycle(tb testing.TB, compression string) (*fastpath.Pipeline, *Dest, *httpWorker) {
	tb.Helper()
	u := newHTTPUpstream(tb, nil)
	answer := []byte{0x0a, 0x04, 0x12, 0x02, 'o', 'k'} // partial_success{error_message: "ok"}
	u.answer = func(_ hit, ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/x-protobuf")
		ctx.SetBody(answer)
	}
	u.record = false
	cfg := httpConfig(tb, u, "concurrency=1,compression="+compression)
	d, err := New(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Shutdown(context.Background()) })
	pc := fastpath.DefaultConfig()
	pc.BatchMaxItems = 1
	p, err := fastpath.New(pc, []fastpath.Destination{d})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p, d, newHTTPWorker(d)
}

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
				if err := p.Consume(fastpath.Traces, body, 1); err != nil {
					panic(err)
				}
				w.call(d.next(timer))
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
