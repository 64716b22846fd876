//go:build !race

package zeroalloc

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/allocattr"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// ownChain is a chain of otlpgate's own gRPC transport at both ends, all in this process: a
// load destination (the own client) sends each request to a complete otlpgate (the own
// server, the pipeline, a destination on the own client), which forwards it to a sink that is
// the own server again in front of a pipeline that discards. Every part of it allocates
// nothing per request, so the whole process may allocate nothing: unlike the grpc-go sink and
// load of the other tests, nothing here is excused.
type ownChain struct {
	load  *pipeline.Pipeline
	sink  *testkit.Discard
	items int64 // spans of one request
	body  []byte
	sent  int64
}

// startOwnSink serves the own transport on 127.0.0.1 in front of a pipeline that seals every
// request as a batch of its own into a Discard.
func startOwnSink(t *testing.T) (string, *testkit.Discard) {
	t.Helper()
	d := &testkit.Discard{}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems, pc.BatchMinGap = 1, 0
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	sc := grpcserver.DefaultConfig()
	sc.Transport = grpcserver.TransportOwn
	s, err := grpcserver.New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("sink shutdown: %v", err)
		}
	})
	return s.Addr().String(), d
}

// ownDest is a destination of the own transport to addr: unary v1 calls one at a time, or an
// OTEP stream (the defaults: a window of 64, re-opened every 960 KiB).
func ownDest(name, addr string, stream bool) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint, c.Transport = name, addr, client.TransportOtlpgate
	c.Protocol, c.Mode, c.Concurrency = client.ProtocolV1, client.ModeUnary, 1
	if stream {
		c.Protocol, c.Mode, c.Streams = client.ProtocolOTEP, client.ModeStream, 1
	}
	return c
}

func startOwnChain(t *testing.T, stream bool, body []byte, items int64) *ownChain {
	t.Helper()
	sinkAddr, sink := startOwnSink(t)
	// otlpgate with its defaults but for the gap between batches: one request at a time is
	// sealed at admission, as it is at any rate where the upstream keeps up.
	cfg := defaultGateConfig(ownDest("zeroalloc_chain", sinkAddr, stream))
	cfg.GRPC.Transport = grpcserver.TransportOwn
	cfg.Pipeline.BatchMinGap = 0
	g := startGateConfig(t, cfg)

	lc := ownDest("zeroalloc_load", g.grpcAddr, stream)
	ld, err := client.New(lc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ld.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		ld.Shutdown(ctx)
	})
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems, pc.BatchMinGap = 1, 0
	pc.QueueMaxBytes = lc.QueueBytes / 2 // the pipeline refuses before the destination would
	load, err := pipeline.New(pc, []pipeline.Destination{ld})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(load.Close)
	return &ownChain{load: load, sink: sink, items: items, body: body}
}

// send sends one request from the load to the sink and waits until the sink has it.
func (c *ownChain) send() {
	if _, err := c.load.Admit(pipeline.Request{Signal: fastpath.Traces, Body: c.body, Items: int(c.items)}); err != nil {
		panic(err)
	}
	c.sent++
	// A sleep, not a yield: AllocsPerRun runs on one P, where a goroutine that only yields
	// keeps the scheduler from polling the network.
	for deadline := time.Now().Add(waitFor); c.sink.Items() < c.sent*c.items; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("the sink has %d of %d spans", c.sink.Items(), c.sent*c.items))
		}
	}
}

// A large request (many DATA frames, well above the 64 KiB of HTTP/2's initial windows)
// crosses otlpgate's own gRPC transport four times here, load client to intake to destination
// to sink, unary v1 Export calls or OTEP stream messages, and the whole process allocates
// nothing per request once warm: the message collected across frames and reads, the windows
// given back as it arrives, the batch it becomes, its DATA written from the batch's bytes, the
// answers. Shapes: the Appendix B large batch (500 spans of 10 attributes) and the anchor's
// 1000 semantic-convention spans (otlpgen.Semconv, about 800 KiB).
func TestOwnTransportLargeZeroAlloc(t *testing.T) {
	for _, shape := range []struct {
		name  string
		shape otlpgen.Shape
	}{{"large", otlpgen.Large}, {"semconv", otlpgen.Semconv}} {
		body, err := otlpgen.New(1).Spans(shape.shape).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		for _, stream := range []bool{false, true} {
			name := shape.name + "/unary"
			if stream {
				name = shape.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				c := startOwnChain(t, stream, body, int64(shape.shape.Spans))
				for range 50 {
					c.send()
				}
				allocs := testing.AllocsPerRun(100, c.send)
				if allocs != 0 {
					// Where from: the same requests again, every allocation recorded.
					rec := allocattr.New()
					rec.Start()
					for range 50 {
						c.send()
					}
					rep := rec.Stop()
					rec.Close()
					t.Errorf("%v allocations per %d-byte request; 50 more: %s\n%s\n%s", allocs, len(body),
						rep.Summary(10), rep.OwnStacks(), fmtSites(rep.OtherSites))
				}
				if got, want := c.sink.Items(), c.sent*c.items; got != want {
					t.Fatalf("the sink got %d spans, want %d", got, want)
				}
			})
		}
	}
}

func fmtSites(sites []allocattr.Site) string {
	var s string
	for _, st := range sites {
		s += fmt.Sprintf("%d objects (%d bytes) by %s\n", st.Objects, st.Bytes, st.Fn)
		for _, f := range st.Frames {
			s += fmt.Sprintf("\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
		}
	}
	return s
}
