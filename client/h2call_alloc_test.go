//go:build !race

package client

import (
	"context"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// h2Bench is a destination on a rawUpstream (which allocates nothing per call) with a
// pipeline that seals every request as a batch, and one unary worker of the destination's
// transport, called by hand.
type h2Bench struct {
	p    *pipeline.Pipeline
	d    *Dest
	call func()
}

func newH2Bench(tb testing.TB, transport string, body []byte) *h2Bench {
	u := newRawUpstream(tb, false, 0)
	cfg := unaryConfig(tb, u.addr(), ProtocolV1, 1)
	cfg.Transport = transport
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
	timer := stoppedTimer()
	var call func(*request)
	if transport == TransportOtlpgate {
		call = newH2Worker(d, fastpath.Traces).call
	} else {
		w := newWorker(d, fastpath.Traces)
		tb.Cleanup(func() { w.release() })
		call = w.call
	}
	return &h2Bench{p: p, d: d, call: func() {
		if _, err := p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			panic(err)
		}
		call(d.next(fastpath.Traces, timer))
	}}
}

// A unary Export call on the own transport, from the batch's hand-over to its answer (the
// HEADERS, the DATA written from the batch's bytes, the reader's decoding of the answer and
// its trailers, the result), allocates nothing once the connection is up: counted over the
// whole process, the upstream included.
func TestH2UnaryZeroAlloc(t *testing.T) {
	for name, body := range map[string][]byte{"small": traceBody("s", 2, 100), "large": traceBody("l", 200, 2000)} {
		t.Run(name, func(t *testing.T) {
			b := newH2Bench(t, TransportOtlpgate, body)
			for range 10 {
				b.call()
			}
			if allocs := testing.AllocsPerRun(300, b.call); allocs != 0 {
				t.Fatalf("%v allocations per call", allocs)
			}
			if got := value(b.d.m.ackedRequests); got != 10+1+300 {
				t.Fatalf("acknowledged %d of %d", got, 10+1+300)
			}
		})
	}
}

// BenchmarkH2Unary compares the two transports on the same upstream, one call at a time.
func BenchmarkH2Unary(b *testing.B) {
	for _, size := range []struct {
		name string
		body []byte
	}{{"small", traceBody("s", 2, 100)}, {"large", traceBody("l", 200, 2000)}} {
		for _, tr := range []string{TransportGRPCGo, TransportOtlpgate} {
			b.Run(size.name+"/"+tr, func(b *testing.B) {
				h := newH2Bench(b, tr, size.body)
				h.call()
				b.ReportAllocs()
				b.SetBytes(int64(len(size.body)))
				b.ResetTimer()
				for b.Loop() {
					h.call()
				}
			})
		}
	}
}
