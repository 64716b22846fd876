package bench

import (
	"net"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath"
)

// HTTPSink receives OTLP/HTTP protobuf trace requests (POST /v1/traces, plain or with the
// Content-Encoding gzip or zstd) for a Sink, which counts them with those it receives over
// gRPC: the far end of the anchor benchmark's relay on its HTTP intake, where the relay passes
// the OTLP/HTTP bytes through as they are.
type HTTPSink struct {
	srv  *fasthttp.Server
	ln   net.Listener
	done chan struct{}
}

// StartHTTP serves OTLP/HTTP on listen for s until the HTTPSink's Close.
func (s *Sink) StartHTTP(listen string) (*HTTPSink, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	h := &HTTPSink{ln: ln, done: make(chan struct{})}
	h.srv = &fasthttp.Server{
		MaxRequestBodySize: 64 << 20,
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) != "/v1/traces" || !ctx.IsPost() {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			body, err := ctx.Request.BodyUncompressed()
			if err != nil {
				s.bad.Add(1)
				ctx.SetStatusCode(fasthttp.StatusBadRequest)
				return
			}
			s.take(fastpath.Traces, body, fastpath.LayoutV1)
			// An empty ExportTraceServiceResponse: no bytes.
			ctx.SetContentType("application/x-protobuf")
		},
	}
	go func() {
		defer close(h.done)
		h.srv.Serve(ln)
	}()
	return h, nil
}

// Addr is the address the HTTP sink listens on.
func (h *HTTPSink) Addr() string { return h.ln.Addr().String() }

// Close stops serving and waits for open requests.
func (h *HTTPSink) Close() {
	h.srv.Shutdown()
	<-h.done
}

// startSinks starts a gRPC sink and its OTLP/HTTP listener on loopback, for the commands that
// measure both intakes against one count; stop closes both.
func startSinks() (sink *Sink, hsink *HTTPSink, stop func(), err error) {
	if sink, err = StartSink("127.0.0.1:0"); err != nil {
		return nil, nil, nil, err
	}
	if hsink, err = sink.StartHTTP("127.0.0.1:0"); err != nil {
		sink.Close()
		return nil, nil, nil, err
	}
	return sink, hsink, func() { hsink.Close(); sink.Close() }, nil
}
