//go:build !race

package zeroalloc

import (
	"runtime"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/allocattr"
)

// strictOwner returns the otlpgate function an allocation is charged to under the strict rule
// (issue 24): the innermost frame outside the runtime and the standard library, when it is
// otlpgate's, so that a standard library call otlpgate makes (context.WithCancelCause, a
// time.AfterFunc) is otlpgate's allocation; "" otherwise. The runtime's type-switch caches
// are nobody's, as allocattr.Allocator says.
//
// Two kinds of allocation are left out as the measurement's, not the code's: the harness's
// own packages (allocattr, this one), and a sync.Pool's per-P array, which a pool makes at its
// first Get after each collection (the measurement starts with one), once per pool and
// collection whatever the traffic.
func strictOwner(frames []runtime.Frame) string {
	for _, f := range frames {
		fn := f.Function
		switch fn {
		case "runtime.buildInterfaceSwitchCache", "runtime.buildTypeAssertCache", "sync.(*Pool).pinSlow":
			return ""
		}
		pkg := allocattr.PackageOf(fn)
		if first, _, _ := strings.Cut(pkg, "/"); !strings.Contains(first, ".") {
			continue // the runtime or the standard library: it allocates for its caller
		}
		if strings.HasPrefix(fn, allocattr.Module) && pkg != allocattr.Module+"internal/allocattr" &&
			pkg != allocattr.Module+"internal/zeroalloc" {
			return fn
		}
		return ""
	}
	return ""
}

// A destination's unary calls, v1 and OTEP, allocate nothing of otlpgate's once warm, counted
// strictly: the allocations of grpc-go's call (its stream, its derived context) are grpc-go's,
// but none may come from a standard library call made by the client, as the context per call
// did (2 objects per call by context.WithCancelCause under client.(*worker).call). Batches of
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
					if err := g.p.Consume(fastpath.Traces, bodies[i], spansPer); err != nil {
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

			var own int64
			var where strings.Builder
			for _, sites := range [][]allocattr.Site{rep.OwnSites, rep.OtherSites} {
				for _, s := range sites {
					fn := strictOwner(s.Frames)
					if fn == "" {
						continue
					}
					own += s.Objects
					where.WriteString(s.Fn + " under " + fn + "\n")
					for _, f := range s.Frames {
						where.WriteString("\t" + f.Function + "\n")
					}
				}
			}
			t.Logf("%d calls: %s", measured, rep.Summary(6))
			if own != 0 {
				t.Errorf("otlpgate's code allocated %d objects in %d unary calls (%.2f per call), counted strictly:\n%s",
					own, measured, float64(own)/measured, where.String())
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
