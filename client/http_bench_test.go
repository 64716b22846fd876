package client

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

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
				if err := p.Consume(fastpath.Traces, body, 1); err != nil {
					b.Fatal(err)
				}
				w.call(d.next(timer))
			}
		})
	}
}
