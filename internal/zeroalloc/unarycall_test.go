//go:build !race

package zeroalloc

import (
	"runtime"
	"testing"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/allocattr"
)

// A destination's unary calls, v1 and OTEP, allocate nothing of otlpgate's once warm, counted
// strictly (allocattr.Allocator): the allocations of grpc-go's call (its stream, its derived
// context) are grpc-go's, but none may come from a standard library call made by the client,
// as the context per call did (2 objects per call by context.WithCancelCause under client.(*worker).call). Batches of
// one request go through a pipeline into the destination and out to the sink, one call each.
func TestUnaryCallStrictOwnAllocs(t *testing.T) {
	for _, protocol := range []string{client.ProtocolV1, client.ProtocolOTEP} {
		t.Run(protocol, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			const warm, measured = 200, 400
			sk := startSink(t)
			dc := client.DefaultConfig()
			dc.Name, dc.Endpoint = "zeroalloc_unary_"+protocol, sk.addr
			dc.Protocol, dc.Mode, dc.Concurrency = protocol, client.ModeUnary, 1
			g := startGate(t, dc, false)
			gen := newBodies()
			bodies := make([][]byte, warm+measured)
			for i := range bodies {
				bodies[i] = gen.proto(i)
			}
			send := func(from, n int) {
				for i := from; i < from+n; i++ {
					if err := g.p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: bodies[i], Items: spansPer}); err != nil {
						t.Fatal(err)
					}
					g.p.Flush()
					g.drained(t)
				}
			}
			rec := allocattr.New()
			defer rec.Close()
			send(0, warm)
			rec.Start()
			send(warm, measured)
			rep := rec.Stop()

			t.Logf("%d calls: %s", measured, rep.Summary(6))
			if rep.Own != 0 {
				t.Errorf("otlpgate's code allocated %d objects in %d unary calls (%.2f per call), counted strictly:\n%s",
					rep.Own, measured, float64(rep.Own)/measured, rep.OwnStacks())
			}
			sk.mu.Lock()
			calls := len(sk.bodies)
			sk.mu.Unlock()
			if calls != warm+measured {
				t.Errorf("the sink got %d calls, want %d", calls, warm+measured)
			}
			// The sink reads OTEP unary requests as v1 bodies; the v1 ones it reads right.
			if got := len(sk.spanIDs(t)); protocol == client.ProtocolV1 && got != (warm+measured)*spansPer {
				t.Errorf("the sink got %d distinct spans, want %d", got, (warm+measured)*spansPer)
			}
		})
	}
}
