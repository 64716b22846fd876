//go:build !race

package zeroalloc

import (
	"runtime"
	"testing"

	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/allocattr"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
)

const (
	warmRequests = 2000 // fill the pools and free lists, through several stream re-opens per lane
	runRequests  = 2000 // the measured requests of one round
	maxRounds    = 6    // measured rounds; one must be free of own allocations
	workers      = 8    // requests in flight at the intake
)

type intake int

const (
	intakeGRPC      intake = iota // unary v1 Export
	intakeHTTPProto               // POST /v1/traces, application/x-protobuf
	intakeHTTPJSON                // POST /v1/traces, application/json
	intakeGRPCGzip                // unary v1 Export, gzip: compressed pass-through to a gzip destination
)

// destConfig is the default destination (a pipelined OTEP stream, re-opened every 960 KiB), or
// with unary set, unary v1 calls.
func destConfig(name, endpoint string, unary bool) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint = name, endpoint
	c.Protocol, c.Mode = client.ProtocolOTEP, client.ModeStream
	if unary {
		c.Protocol, c.Mode = client.ProtocolV1, client.ModeUnary
	}
	return c
}

// forward sends warmRequests and then rounds of runRequests small requests (25 spans each)
// through a complete otlpgate to a sink, until a round passes in which otlpgate's own code
// allocated nothing, and fails, printing each own stack of the last round, when none of
// maxRounds does; then checks that the sink got every span it sent once. It returns the number
// of requests it sent.
//
// A cost per request or per stream re-open shows in every round (hundreds of objects per
// round). What a round may still show is a pool's stock falling one buffer short of a peak of
// batches in flight that the warm-up did not reach: the buffer goes back to the pool, the next
// peak finds it, and a later round is clean. The steady state allocates nothing.
func forward(t *testing.T, in intake, unary bool) int { return forwardTenants(t, in, unary, nil, 0) }

// collectEvery is how many requests of a measured round forwardCollected sends between two
// pairs of collections. A sync.Pool gives its items up to the second collection after they
// were put, so code that recycles through one makes its objects again after every pair, in
// otlpgate's frames; a free list keeps them. 2,000 requests a round make 10 pairs.
const collectEvery = 200

// forwardCollected is forward with two collections after every collectEvery requests of a
// measured round, while batches are still in flight: what a busy process meets every few
// hundred batches (the collector runs on gRPC's and net/http's garbage), and what the
// collector-off measurement alone would not.
func forwardCollected(t *testing.T, in intake, unary bool) int {
	return forwardTenants(t, in, unary, nil, collectEvery)
}

// forwardTenants is forward with -intake.headers=x-scope-orgid when orgs is not empty: the
// load's workers send as the tenants orgs, in turns, and the destination forwards the header.
//
// With collect > 0, each measured round collects twice after every collect requests
// (forwardCollected).
func forwardTenants(t *testing.T, in intake, unary bool, orgs []string, collect int) int {
	return forwardOn(t, in, unary, orgs, collect, "")
}

// forwardOn is forwardTenants with the destination on the gRPC transport transport ("" for
// the default).
func forwardOn(t *testing.T, in intake, unary bool, orgs []string, collect int, transport string) int {
	// One P: sync.Pool keeps the item a P put last where only that P's Get finds it, also after
	// the collection that starts the measurement. With one P, whether the measured requests find
	// the pools stocked by the warm-up does not depend on which P each goroutine last ran on.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sk := startSink(t)
	dc := destConfig("zeroalloc_"+t.Name(), sk.addr, unary)
	if transport != "" {
		dc.Transport = transport
	}
	if len(orgs) > 0 {
		dc.ForwardHeaders = []string{"x-scope-orgid"}
	}
	if in == intakeGRPCGzip {
		dc.Compression = "gzip" // what the requests arrive in: their batches go out as they came
	}
	g := startGate(t, dc, len(orgs) > 0)

	total := warmRequests + maxRounds*runRequests
	bodies := make([][]byte, total)
	gen := newBodies()
	for i := range bodies {
		switch in {
		case intakeHTTPJSON:
			bodies[i] = gen.json(i)
		case intakeGRPCGzip:
			bodies[i] = ziptest.Gzip(t, gen.proto(i))
		default:
			bodies[i] = gen.proto(i)
		}
	}
	var senders []sender
	switch in {
	case intakeGRPC:
		senders = grpcSenders(t, g.grpcAddr, 2*workers, bodies, orgs...)
	case intakeGRPCGzip:
		// The client's gzip writer (otlpgate's, registered for the process) sends a message
		// that is already a gzip member as it is.
		senders = grpcSendersWith(t, g.grpcAddr, 2*workers, bodies, []grpc.CallOption{grpc.UseCompressor("gzip")}, orgs...)
	case intakeHTTPProto:
		senders = httpSenders(t, g.httpAddr, "application/x-protobuf", 2*workers, bodies)
	case intakeHTTPJSON:
		senders = httpSenders(t, g.httpAddr, "application/json", 2*workers, bodies)
	}

	rec := allocattr.New() // the collector stays off from here: the warm-up's pool stock survives
	defer rec.Close()
	// The warm-up runs at twice the measured concurrency, then at the measured one: the pools
	// are stocked for a higher peak of batches in flight than the measured requests reach.
	drive(t, 0, warmRequests/2, senders)
	drive(t, warmRequests/2, warmRequests-warmRequests/2, senders[:workers])
	g.drained(t)

	// The rounds follow one another with one collection between them (Lap): pooled items the
	// last round used are still pooled in the next, so a buffer a round had to add stays.
	var rep allocattr.Report
	clean, sent := -1, warmRequests
	opened := sk.streams.Load()
	rec.Start()
	for round := 0; round < maxRounds && clean < 0; round++ {
		if collect > 0 {
			for k := 0; k < runRequests; k += collect {
				drive(t, sent+k, min(collect, runRequests-k), senders[:workers])
				runtime.GC()
				runtime.GC()
			}
		} else {
			drive(t, sent, runRequests, senders[:workers])
		}
		g.drained(t)
		rep = rec.Lap()
		sent += runRequests
		now := sk.streams.Load()
		reopens := now - opened
		opened = now
		t.Logf("round %d, %d requests, %v streams opened: %s", round+1, runRequests, reopens, rep.Summary(8))
		if !unary && reopens < 4 {
			t.Fatalf("%v streams opened during round %d, want at least 4: the re-open path went unmeasured", reopens, round+1)
		}
		if rep.Own == 0 {
			clean = round
		}
	}
	rec.Stop()
	if clean < 0 {
		t.Errorf("otlpgate's own code allocated in each of %d rounds of %d requests; the last: %d objects (%.3f per request):\n%s",
			maxRounds, runRequests, rep.Own, float64(rep.Own)/runRequests, rep.OwnStacks())
	}
	// The sink's ids run 1..sent*spansPer: the bodies of the rounds a clean round made
	// unnecessary are never sent (sending them proved no more, at seconds each in a binary that
	// records every allocation).
	seen := sk.spanIDs(t)
	want := sent * spansPer
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
	return sent
}

func TestGRPCToStreamOwnAllocs(t *testing.T)      { forward(t, intakeGRPC, false) }
func TestGRPCToUnaryOwnAllocs(t *testing.T)       { forward(t, intakeGRPC, true) }
func TestHTTPProtoToStreamOwnAllocs(t *testing.T) { forward(t, intakeHTTPProto, false) }
func TestHTTPProtoToUnaryOwnAllocs(t *testing.T)  { forward(t, intakeHTTPProto, true) }
func TestHTTPJSONToStreamOwnAllocs(t *testing.T)  { forward(t, intakeHTTPJSON, false) }
func TestHTTPJSONToUnaryOwnAllocs(t *testing.T)   { forward(t, intakeHTTPJSON, true) }

// On otlpgate's own gRPC client (transport=otlpgate) the destination's transport is
// otlpgate's code too, and counted as its own: its OTEP stream (each request's DATA written
// from the batch's bytes, the answers read by the connection's reader, the re-opens every
// 960 KiB) and its unary v1 calls allocate nothing either, collections included.
func TestGRPCToOwnTransportStreamOwnAllocs(t *testing.T) {
	forwardOn(t, intakeGRPC, false, nil, 0, client.TransportOtlpgate)
}
func TestGRPCToOwnTransportStreamCollectedOwnAllocs(t *testing.T) {
	forwardOn(t, intakeGRPC, false, nil, collectEvery, client.TransportOtlpgate)
}
func TestGRPCToOwnTransportUnaryOwnAllocs(t *testing.T) {
	forwardOn(t, intakeGRPC, true, nil, 0, client.TransportOtlpgate)
}

// Compressed pass-through costs none: gzip requests over gRPC keep their bytes (the intake's
// WireDecompressor) and join batches that the gzip destination sends as they are.
func TestGRPCGzipPassThroughToUnaryOwnAllocs(t *testing.T) {
	before := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	total := forward(t, intakeGRPCGzip, true)
	if got := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - before; got != float64(total) {
		t.Errorf("%v requests passed through compressed, want all %d", got, total)
	}
}

func TestGRPCToStreamCollectedOwnAllocs(t *testing.T) { forwardCollected(t, intakeGRPC, false) }
func TestHTTPProtoToStreamCollectedOwnAllocs(t *testing.T) {
	forwardCollected(t, intakeHTTPProto, false)
}
func TestHTTPJSONToStreamCollectedOwnAllocs(t *testing.T) { forwardCollected(t, intakeHTTPJSON, false) }
func TestGRPCToUnaryCollectedOwnAllocs(t *testing.T)      { forwardCollected(t, intakeGRPC, true) }

// Tenants cost no allocation either: the gRPC intake reads each call's X-Scope-OrgID where
// grpc-go filed it, admission keeps a batch per tenant, and the destination sends each batch
// with its tenant's header from a context made once per tenant.
func TestGRPCTenantsToUnaryOwnAllocs(t *testing.T) {
	forwardTenants(t, intakeGRPC, true, []string{"acme", "beta", "gamma"}, 0)
}
