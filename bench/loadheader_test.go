package bench

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// headerLog counts the requests by the value of their tenant header ("" for none).
type headerLog struct {
	mu   sync.Mutex
	seen map[string]int
	n    int
	all  chan struct{} // closed when the first `workers` requests have arrived
}

func newHeaderLog() *headerLog { return &headerLog{seen: map[string]int{}, all: make(chan struct{})} }

// add notes a request's value. The first requests wait (bounded) until one from each worker is
// in: a worker that finds the receiver fast could otherwise send every batch before the others
// start, and the test would see one value only.
func (h *headerLog) add(v string, workers int) {
	h.mu.Lock()
	h.seen[v]++
	h.n++
	n := h.n
	if n == workers {
		close(h.all)
	}
	h.mu.Unlock()
	if n <= workers {
		select {
		case <-h.all:
		case <-time.After(10 * time.Second):
		}
	}
}

// The load sends its header on every request, over gRPC and OTLP/HTTP, with each worker's value:
// with three workers and three values, every value reaches the receiver and no request goes
// without one.
func TestLoadHeader(t *testing.T) {
	const batches = 60
	want := []string{"acme", "beta", "gamma"}
	check := func(proto string, h *headerLog) {
		t.Helper()
		h.mu.Lock()
		defer h.mu.Unlock()
		total := 0
		for _, v := range want {
			if h.seen[v] == 0 {
				t.Errorf("%s: no request carried %q: %v", proto, v, h.seen)
			}
			total += h.seen[v]
		}
		if total != batches || len(h.seen) != len(want) {
			t.Errorf("%s: requests by header value %v, want %d requests over %v only", proto, h.seen, batches, want)
		}
	}
	cfg := LoadConfig{Shape: otlpgen.Shape{Spans: 3, Attrs: 2}, Batches: batches, InFlight: 3, Seed: 1,
		Header: "x-scope-orgid", HeaderValues: want}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// gRPC: any method, answered with an empty message.
	var gh = newHeaderLog()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(st.Context())
		v := ""
		if vs := md.Get("x-scope-orgid"); len(vs) == 1 {
			v = vs[0]
		}
		gh.add(v, cfg.InFlight)
		var r codec.Raw
		if err := st.RecvMsg(&r); err != nil {
			return err
		}
		r.Release()
		var empty codec.Raw
		return st.SendMsg(&empty)
	}), grpc.ForceServerCodecV2(codec.New(nil)))
	go gs.Serve(ln)
	defer gs.Stop()
	cfg.Target, cfg.Protocol = ln.Addr().String(), "v1"
	if res, err := RunLoad(ctx, cfg); err != nil || res.Acked != batches {
		t.Fatalf("v1: %+v, %v", res, err)
	}
	check("v1", gh)

	// OTLP/HTTP.
	hh := newHeaderLog()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
		hh.add(string(c.Request.Header.Peek("x-scope-orgid")), cfg.InFlight)
		c.SetContentType("application/x-protobuf")
	}}
	go hs.Serve(hln)
	defer hs.Shutdown()
	cfg.Target, cfg.Protocol = hln.Addr().String(), "http-proto"
	if res, err := RunLoad(ctx, cfg); err != nil || res.Acked != batches {
		t.Fatalf("http-proto: %+v, %v", res, err)
	}
	check("http-proto", hh)
}
