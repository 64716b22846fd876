package hostile

import (
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// The gRPC attacks of the review, each in a short, bounded form, against the real binary with
// the well-behaved client beside it.
//
// Memory bounds are stated as the fixed overhead below plus what the attack may hold under the
// limits the test configures. The overhead covers the Go runtime, the binary, the pools warmed
// by the well-behaved client and the garbage the collector leaves between cycles (GOGC=100
// lets the heap reach twice its live size): otlpgate at rest with the client sending peaks at
// about 22 MiB (TestBaselineServed), so 64 MiB leaves room without hiding an attack that holds
// tens of MiB.
const grpcOverhead = 64 << 20

// grpcWitness starts the well-behaved client (a request on each intake every 100 ms) and waits
// until it has been served, so that its connections exist before the attack begins.
func grpcWitness(t *testing.T, g *gate) *witness {
	t.Helper()
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	w.waitServed(t, 2, 30*time.Second)
	return w
}

// grpcCheck is the common end of every attack: the process lives, its peak RSS stays within
// bound, its goroutines within maxG, and the well-behaved client was answered throughout (no
// refusal run longer than the -intake.wait it was given).
func grpcCheck(t *testing.T, g *gate, w *witness, bound int64, maxG int, wait time.Duration) {
	t.Helper()
	g.alive(t)
	if n := grpcGoroutines(t, g); n > maxG {
		t.Errorf("%d goroutines, bound %d", n, maxG)
	}
	// One more round trip after the attack: the client is still served.
	w.waitServed(t, 2, 30*time.Second)
	w.end(t, wait)
	g.alive(t)
	if rss := g.PeakRSS(t); rss > bound {
		t.Errorf("peak RSS %d MiB, bound %d MiB", rss>>20, bound>>20)
	} else {
		t.Logf("peak RSS %d MiB (bound %d MiB)", rss>>20, bound>>20)
	}
}

// Finding 3: HPACK indexing makes a header list cheap to send and dear to hold. One -bin field
// of 4,000 characters enters the connection's dynamic table once; every later reference to it
// is one byte on the wire and 4 KB decoded, plus 3 KB when gRPC decodes the base64 into the
// call's metadata. Each stream below asks for 16 MB of decoded headers with 4 KB of wire, and
// then waits, as an idle OTEP stream does. With -grpc.max-header-bytes=16KiB (the default)
// every one is refused with RST_STREAM(FRAME_SIZE_ERROR) and holds nothing; without a bound
// gRPC accepted 16 MiB per stream and kept it while the stream lived.
func TestGRPCHeaderListBounded(t *testing.T) {
	const streams = 24
	g := startGate(t, "-intake.wait=1s")
	w := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(0), streamWindow: -1})
	raw := make([]byte, 3000)
	for i := range raw {
		raw[i] = byte(rand.Uint32())
	}
	bin := hpack.HeaderField{Name: "x-a-bin", Value: base64.RawStdEncoding.EncodeToString(raw)}
	fields := grpcHeaders(grpcOTEPStream)
	for range 4000 {
		fields = append(fields, bin)
	}
	ids := make([]uint32, streams)
	for i := range ids {
		id, err := c.open(fields, false)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		ids[i] = id
	}
	// Each stream is refused on its own; the connection stays.
	refused := func() bool {
		for _, id := range ids {
			if c.ended(id) == "" {
				return false
			}
		}
		return true
	}
	if !grpcWaitFor(10*time.Second, refused) {
		t.Errorf("streams still open after 10 s: %v", c.endings())
	}
	if e := c.endings(); e["rst:FRAME_SIZE_ERROR"] != streams {
		t.Errorf("stream endings %v, want %d × rst:FRAME_SIZE_ERROR", e, streams)
	}
	if v := g.metric(t, "otlpgate_grpc_refused_streams_total", `reason="header_too_large"`); v != streams {
		t.Errorf("otlpgate_grpc_refused_streams_total{reason=\"header_too_large\"} = %v, want %d", v, streams)
	}
	// Bound: the overhead, plus at most -grpc.max-header-bytes decoded per stream, held at
	// most three times over (HPACK's strings, gRPC's metadata copy, its base64 decoding),
	// and the 4 KiB dynamic table: well under 2 MiB for 24 streams.
	grpcCheck(t, g, w, grpcOverhead+streams*3*(16<<10)+4<<10, 42+20, time.Second)
}

// Finding 4: answers a client never takes. The client grants its streams no HTTP/2 window
// (SETTINGS_INITIAL_WINDOW_SIZE 0), so the server cannot send a byte of an answer, and sends
// requests as fast as it can. Each stream stops reading once -grpc.stream.max-unsent (64)
// answers wait, and the connection is closed when none is taken within
// -grpc.stream.answer-timeout (2 s here). Before the bound, gRPC queued 8,192 answers per
// stream (its write quota counts 8 bytes for each) in 4 KiB buffers: these 32 streams would
// have held 1 GiB.
func TestGRPCUnreadAnswersBounded(t *testing.T) {
	const streams, perStream = 32, 2000
	g := startGate(t, "-intake.wait=1s", "-grpc.stream.answer-timeout=2s")
	w := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(1), streamWindow: 0})
	grpcFloodAnswers(t, c, streams, perStream, grpcOTEPRequest)
	if !grpcWaitFor(20*time.Second, c.isClosed) {
		t.Errorf("connection still open 20 s after its answers stopped being taken")
	}
	if v := g.metric(t, "otlpgate_grpc_closed_connections_total", `reason="answers_not_taken"`); v != 1 {
		t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"answers_not_taken\"} = %v, want 1", v)
	}
	if v := g.metric(t, "otlpgate_grpc_stream_stalls_total"); v < streams {
		t.Errorf("otlpgate_grpc_stream_stalls_total = %v, want at least %d", v, streams)
	}
	// Bound: the overhead, plus per stream 64 unsent answers (a 16-byte slot, gRPC's data
	// frame, header and buffer objects: under 512 bytes each) and the requests the stream did
	// not read (at most its 1 MiB window; here 2,000 × 8 bytes): under 1 MiB for 32 streams.
	grpcCheck(t, g, w, grpcOverhead+streams*(64*512+perStream*8), 42+20, time.Second)
}

// The same with -ack=upstream, whose answers wait for delivery: a goroutine per request in
// flight, up to -grpc.stream.window (256) per stream, each of which used to wait in SendMsg
// once gRPC's write quota was spent (256 streams: 66,070 goroutines). Now the waiters hand
// their answers to one sender per stream and end: once delivered, the stalled streams hold a
// handler, a loop and a sender each.
func TestGRPCUnreadAnswersUpstreamBounded(t *testing.T) {
	const streams, perStream = 8, 10000
	g := startGate(t, "-intake.wait=1s", "-ack=upstream", "-grpc.stream.answer-timeout=3s")
	w := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(2), streamWindow: 0})
	grpcFloodAnswers(t, c, streams, perStream, func(id uint64) []byte { return grpcOTEPSpansRequest(t, id) })
	// While the streams are stalled and before the connection is closed: 3 goroutines a
	// stream, and those of gRPC's transport (reader, writer, keepalive).
	time.Sleep(time.Second)
	if !c.isClosed() {
		if n := grpcGoroutines(t, g); n > 42+20+3*streams {
			t.Errorf("%d goroutines with %d stalled streams, bound %d", n, streams, 42+20+3*streams)
		}
	}
	if !grpcWaitFor(20*time.Second, c.isClosed) {
		t.Errorf("connection still open 20 s after its answers stopped being taken")
	}
	if v := g.metric(t, "otlpgate_grpc_closed_connections_total", `reason="answers_not_taken"`); v != 1 {
		t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"answers_not_taken\"} = %v, want 1", v)
	}
	// Bound: as above, plus the requests admitted (at most 256 a stream, a few hundred bytes
	// each) and their batches, with the file destination writing them out.
	grpcCheck(t, g, w, grpcOverhead+streams*(64*512+perStream*200), 42+20, time.Second)
}

// grpcFloodAnswers opens streams OTEP streams on c and sends perStream requests on each, made
// by req, round-robin, for as long as the server reads them (up to 10 s): a stream whose window
// stays shut for a second is left alone.
func grpcFloodAnswers(t *testing.T, c *grpcRaw, streams, perStream int, req func(uint64) []byte) {
	t.Helper()
	ids := make([]uint32, streams)
	for i := range ids {
		id, err := c.open(grpcHeaders(grpcOTEPStream), false)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	deadline := time.Now().Add(10 * time.Second)
	shut := make([]bool, streams)
	for n := 0; n < perStream && time.Now().Before(deadline); n++ {
		open := 0
		for i, id := range ids {
			if shut[i] {
				continue
			}
			switch err := c.send(id, req(uint64(n+1)), false); {
			case errors.Is(err, errNoWindow):
				shut[i] = true
			case err != nil:
				return // the connection closed
			default:
				open++
			}
		}
		if open == 0 {
			return
		}
	}
}
