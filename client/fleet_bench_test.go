package client

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// countSink is a gateway's destination that counts items and finishes each batch at once. Unlike
// testkit.Discard, the gateways of a fleet share its counter.
type countSink struct{ items *atomic.Int64 }

func (c countSink) Name() string { return "sink" }
func (c countSink) Enqueue(b *pipeline.Batch) error {
	c.items.Add(int64(b.Items))
	b.Done(true)
	return nil
}

// startSink runs an otlpgate gateway in process (gRPC intake, pipeline, counting sink).
func startSink(tb testing.TB, items *atomic.Int64) string {
	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{countSink{items}})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	sc := grpcserver.DefaultConfig()
	sc.Listen = ln.Addr().String()
	srv, err := grpcserver.New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	srv.Serve(ln)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		srv.Shutdown(ctx)
		p.Close()
	})
	return ln.Addr().String()
}

func cpuNanos() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkFleetEdge measures the CPU per span of an edge (pipeline and outlet) with its
// gateways in the same process: one destination to one gateway, and a fleet splitting by trace
// id over three. Each request is an Appendix B small batch (100 spans, 4 attributes) of 10
// traces. The CPU of the whole process is reported, gateways included, so the difference
// between the two is the cost of balancing.
func BenchmarkFleetEdge(b *testing.B) {
	req := otlpgen.New(11).Spans(otlpgen.Small)
	i := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				binary.BigEndian.PutUint64(sp.TraceId, uint64(i%10)*0x9e3779b97f4a7c15+1)
				i++
			}
		}
	}
	body, err := req.MarshalVT()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sinks int
	}{{"one-destination", 1}, {"fleet-of-3", 3}} {
		b.Run(tc.name, func(b *testing.B) {
			var items atomic.Int64
			var addrs []string
			for range tc.sinks {
				addrs = append(addrs, startSink(b, &items))
			}
			cfg := DefaultConfig()
			cfg.Name = "bench_" + tc.name
			cfg.KeepaliveTime = 0
			pc := pipeline.DefaultConfig()
			cfg.QueueBytes = pc.QueueMaxBytes // as cmd/ sets it: the destination never refuses
			var dest pipeline.Destination
			var stop func(context.Context) error
			if tc.sinks == 1 {
				cfg.Endpoint = addrs[0]
				d, err := New(cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				d.Start()
				dest, stop = d, d.Shutdown
			} else {
				cfg.Resolver, cfg.Endpoints = ResolverStatic, addrs
				f, err := NewFleet(cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				f.Start()
				dest, stop = f, f.Shutdown
			}
			p, err := pipeline.New(pc, []pipeline.Destination{dest})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			cpu0 := cpuNanos()
			sent := int64(0)
			for b.Loop() {
				for p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 100}) != nil {
					time.Sleep(time.Millisecond)
				}
				sent += 100
			}
			p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			if err := stop(ctx); err != nil {
				b.Fatal(err)
			}
			for deadline := time.Now().Add(waitFor); items.Load() < sent && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if got := items.Load(); got != sent {
				b.Fatalf("%d spans arrived, %d sent", got, sent)
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(sent), "cpu-ns/span")
			b.ReportMetric(0, "ns/op")
		})
	}
}
