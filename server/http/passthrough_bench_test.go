package httpserver

import (
	"log/slog"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// wireDiscard is testkit.Discard sending pass-through batches of enc.
type wireDiscard struct {
	*testkit.Discard
	enc pipeline.Encoding
}

func (d wireDiscard) PassThrough() pipeline.Encoding { return d.enc }

// newPassThroughHarness is newHandlerHarness with a destination that sends enc as it is, so
// that compressed requests of enc take the pass-through way.
func newPassThroughHarness(tb testing.TB, enc pipeline.Encoding) *handlerHarness {
	tb.Helper()
	h := &handlerHarness{sink: &testkit.Discard{}}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 1 << 62
	var err error
	if h.p, err = pipeline.New(pc, []pipeline.Destination{wireDiscard{h.sink, enc}}); err != nil {
		tb.Fatal(err)
	}
	if h.srv, err = New(DefaultConfig(), h.p, slog.New(slog.DiscardHandler)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.p.Close)
	return h
}

// BenchmarkHandlerPassThrough is BenchmarkHandler's compressed cases with a destination that
// sends the same compression: the request is still inflated and scanned, and its received
// bytes join the batch (no compression on the way out, which this benchmark does not count).
func BenchmarkHandlerPassThrough(b *testing.B) {
	req := traces(b, 1, 100)
	for _, tc := range []struct {
		name, coding string
		enc          pipeline.Encoding
		body         []byte
	}{{"gzip", "gzip", pipeline.EncodingGzip, gzipped(b, req)}, {"zstd", "zstd", pipeline.EncodingZstd, zstded(b, req)}} {
		b.Run(tc.name, func(b *testing.B) {
			h := newPassThroughHarness(b, tc.enc)
			ctx := h.ctx(tc.coding, tc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				h.srv.handle(ctx)
				ctx.Response.Reset()
			}
		})
	}
}
