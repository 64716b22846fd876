package client

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// newHTTPCycle is a destination for a loopback upstream that answers every POST with 200 and
// a small protobuf body (a partial success of 0 items with a message), and a pipeline that
// seals each request as its own batch. The destination's workers are not started: the caller
// plays one, taking each request from the queue and calling it.
func newHTTPCycle(tb testing.TB, compression string) (*pipeline.Pipeline, *Dest, *httpWorker) {
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
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p, d, newHTTPWorker(d, fastpath.Traces)
}

// BenchmarkHTTPSend measures one request's OTLP/HTTP cycle on loopback (see
// TestHTTPSendZeroAlloc): pipeline, queue, compression, POST, answer, Done.
func BenchmarkHTTPSend(b *testing.B) {
	for _, comp := range []string{"none", "gzip", "zstd"} {
		b.Run(comp, func(b *testing.B) {
			p, d, w := newHTTPCycle(b, comp)
			body := traceBody("z", 8, 1000)
			timer := stoppedTimer()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
					b.Fatal(err)
				}
				w.call(d.next(fastpath.Traces, timer))
			}
		})
	}
}
