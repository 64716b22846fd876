package httpserver

import (
	"log/slog"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

type handlerHarness struct {
	p    *pipeline.Pipeline
	srv  *Server
	sink *testkit.Discard
}

// newHandlerHarness is a server that is never started: tests call its handler directly.
func newHandlerHarness(tb testing.TB) *handlerHarness {
	tb.Helper()
	return newProcessingHarness(tb, nil)
}

// newProcessingHarness is newHandlerHarness with the processing steps proc (nil: none).
func newProcessingHarness(tb testing.TB, proc pipeline.Processor) *handlerHarness {
	tb.Helper()
	h := &handlerHarness{sink: &testkit.Discard{}}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 1 << 62
	pc.Processor = proc
	var err error
	if h.p, err = pipeline.New(pc, []pipeline.Destination{h.sink}); err != nil {
		tb.Fatal(err)
	}
	if h.srv, err = New(DefaultConfig(), h.p, slog.New(slog.DiscardHandler)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.p.Close)
	return h
}

// ctx is a request context holding one protobuf trace request.
func (h *handlerHarness) ctx(coding string, body []byte) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/v1/traces")
	req.Header.SetContentType(ctProto)
	if coding != "" {
		req.Header.Set("Content-Encoding", coding)
	}
	req.SetBody(body)
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	return ctx
}

func BenchmarkHandler(b *testing.B) {
	req := traces(b, 1, 100)
	for _, tc := range []struct {
		name, coding string
		body         []byte
	}{{"protobuf", "", req}, {"protobuf-gzip", "gzip", gzipped(b, req)}, {"protobuf-zstd", "zstd", zstded(b, req)}} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHandlerHarness(b)
			ctx := h.ctx(tc.coding, tc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				h.srv.handle(ctx)
				ctx.Response.Reset()
			}
		})
	}
	b.Run("json", func(b *testing.B) {
		h := newHandlerHarness(b)
		ctx := h.ctx("", []byte(sampleJSON))
		ctx.Request.Header.SetContentType(ctJSON)
		b.ReportAllocs()
		b.SetBytes(int64(len(sampleJSON)))
		for b.Loop() {
			h.srv.handle(ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatal(ctx.Response.StatusCode())
			}
			ctx.Response.Reset()
		}
	})
}

const sampleJSON = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"web"}}]},
 "scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b174",
 "name":"checkout","kind":2,"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
 "attributes":[{"key":"http.route","value":{"stringValue":"/checkout"}},{"key":"retries","value":{"intValue":"3"}}]}]}]}]}`
