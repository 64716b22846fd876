//go:build !race

package zeroalloc

import (
	"runtime"
	"testing"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/allocattr"
)

const (
	warmRequests = 2000 // fill the pools and free lists, through several stream re-opens per lane
	runRequests  = 2000 // the measured requests
	workers      = 8    // requests in flight at the intake
)

type intake int

const (
	intakeGRPC      intake = iota // unary v1 Export
	intakeHTTPProto               // POST /v1/traces, application/x-protobuf
	intakeHTTPJSON                // POST /v1/traces, application/json
)

// destConfig is the default destination (a pipelined OTEP stream, re-opened every 960 KiB), or
// with unary set, unary v1 calls.
func destConfig(name, endpoint string, unary bool) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint = name, endpoint
	if unary {
		c.Protocol, c.Mode = client.ProtocolV1, client.ModeUnary
	}
	return c
}

// forward sends warmRequests and then runRequests small requests (25 spans each) through a
// complete otlpgate to a sink, and fails on any allocation otlpgate's own code made during the
// second part, printing each such stack; then checks that the sink got every span once.
func forward(t *testing.T, in intake, unary bool) {
	// One P: sync.Pool keeps the item a P put last where only that P's Get finds it, also after
	// the collection that starts the measurement. With one P, whether the measured requests find
	// the pools stocked by the warm-up does not depend on which P each goroutine last ran on.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sk := startSink(t)
	name := "zeroalloc_" + t.Name()
	g := startGate(t, destConfig(name, sk.addr, unary))

	total := warmRequests + runRequests
	bodies := make([][]byte, total)
	gen := newBodies()
	for i := range bodies {
		if in == intakeHTTPJSON {
			bodies[i] = gen.json(i)
		} else {
			bodies[i] = gen.proto(i)
		}
	}
	var senders []sender
	switch in {
	case intakeGRPC:
		senders = grpcSenders(t, g.grpcAddr, 2*workers, bodies)
	case intakeHTTPProto:
		senders = httpSenders(t, g.httpAddr, "application/x-protobuf", 2*workers, bodies)
	case intakeHTTPJSON:
		senders = httpSenders(t, g.httpAddr, "application/json", 2*workers, bodies)
	}

	rec := allocattr.New() // the collector stays off from here: the warm-up's pool stock survives
	// The warm-up runs at twice the measured concurrency, then at the measured one: the pools
	// are stocked for a higher peak of batches in flight than the measured requests reach.
	drive(t, 0, warmRequests/2, senders)
	drive(t, warmRequests/2, warmRequests-warmRequests/2, senders[:workers])
	g.drained(t)
	opened := streamsOpened(t, name)

	rec.Start()
	drive(t, warmRequests, runRequests, senders[:workers])
	g.drained(t)
	rep := rec.Stop()

	reopens := streamsOpened(t, name) - opened
	seen := sk.spanIDs(t)
	t.Logf("%d requests: %s", runRequests, rep.Summary(8))
	if rep.Own != 0 {
		t.Errorf("otlpgate's own code allocated %d objects over %d requests (%.3f per request):\n%s",
			rep.Own, runRequests, float64(rep.Own)/runRequests, rep.OwnStacks())
	}
	if !unary && reopens < 4 {
		t.Errorf("%v streams opened during the run, want at least 4: the re-open path went unmeasured", reopens)
	}
	t.Logf("streams opened during the run: %v", reopens)

	want := total * spansPer
	missing, dups := 0, 0
	for id := uint64(1); id <= uint64(want); id++ {
		switch n := seen[id]; {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	if missing > 0 || dups > 0 || len(seen) != want {
		t.Errorf("the sink got %d distinct span ids, want %d (ids 1..%d): %d missing, %d duplicates",
			len(seen), want, want, missing, dups)
	}
}

func TestGRPCToStreamOwnAllocs(t *testing.T)      { forward(t, intakeGRPC, false) }
func TestGRPCToUnaryOwnAllocs(t *testing.T)       { forward(t, intakeGRPC, true) }
func TestHTTPProtoToStreamOwnAllocs(t *testing.T) { forward(t, intakeHTTPProto, false) }
func TestHTTPProtoToUnaryOwnAllocs(t *testing.T)  { forward(t, intakeHTTPProto, true) }
func TestHTTPJSONToStreamOwnAllocs(t *testing.T)  { forward(t, intakeHTTPJSON, false) }
func TestHTTPJSONToUnaryOwnAllocs(t *testing.T)   { forward(t, intakeHTTPJSON, true) }
