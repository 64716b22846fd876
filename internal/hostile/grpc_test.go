package hostile

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
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

// grpcTransports are the values of -grpc.transport the attacks that apply to both run against.
var grpcTransports = []string{"grpc-go", "otlpgate"}

// grpcSlack is how many goroutines an attack may leave beyond those of otlpgate at rest with
// the well-behaved client: the attacker's connection (gRPC's reader, writer and keepalive) and
// calls still ending when they are counted.
const grpcSlack = 20

// grpcWitness starts the well-behaved client (a request on each intake every 100 ms), waits
// until it has been served, so that its connections exist before the attack begins, and
// returns it with otlpgate's goroutines at that point.
func grpcWitness(t *testing.T, g *gate) (*witness, int) {
	t.Helper()
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	w.waitServed(t, 2, 30*time.Second)
	return w, grpcGoroutines(t, g)
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
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCHeaderListBounded(t, tr) })
	}
}

func testGRPCHeaderListBounded(t *testing.T, transport string) {
	const streams = 24
	g := startGate(t, "-intake.wait=1s", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
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
	grpcCheck(t, g, w, grpcOverhead+streams*3*(16<<10)+4<<10, base+grpcSlack, time.Second)
}

// Finding 4: answers a client never takes. The client grants its streams no HTTP/2 window
// (SETTINGS_INITIAL_WINDOW_SIZE 0), so the server cannot send a byte of an answer, and sends
// requests as fast as it can. Each stream stops reading once -grpc.stream.max-unsent (64)
// answers wait, and when none is taken within -grpc.stream.answer-timeout (2 s here) grpc-go's
// transport closes the connection, the own transport ends each stream alone
// (RESOURCE_EXHAUSTED). Before the bound, gRPC queued 8,192 answers per stream (its write
// quota counts 8 bytes for each) in 4 KiB buffers: these 32 streams would have held 1 GiB.
func TestGRPCUnreadAnswersBounded(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCUnreadAnswersBounded(t, tr) })
	}
}

func testGRPCUnreadAnswersBounded(t *testing.T, transport string) {
	const streams, perStream = 32, 2000
	g := startGate(t, "-intake.wait=1s", "-grpc.stream.answer-timeout=2s", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(1), streamWindow: 0})
	ids := grpcFloodAnswers(t, c, streams, perStream, grpcOTEPRequest)
	grpcAnswersNotTaken(t, g, c, ids)
	if v := g.metric(t, "otlpgate_grpc_stream_stalls_total"); v < streams {
		t.Errorf("otlpgate_grpc_stream_stalls_total = %v, want at least %d", v, streams)
	}
	// Bound: the overhead, plus per stream 64 unsent answers (a 16-byte slot, gRPC's data
	// frame, header and buffer objects: under 512 bytes each) and the requests the stream did
	// not read (at most its 1 MiB window; here 2,000 × 8 bytes): under 1 MiB for 32 streams.
	grpcCheck(t, g, w, grpcOverhead+streams*(64*512+perStream*8), base+grpcSlack, time.Second)
}

// The same with -ack=upstream, whose answers wait for delivery: a goroutine per request in
// flight, up to -grpc.stream.window (256) per stream, each of which used to wait in SendMsg
// once gRPC's write quota was spent (256 streams: 66,070 goroutines). Now the waiters hand
// their answers to one sender per stream and end: once delivered, the stalled streams hold a
// handler, a loop and a sender each.
func TestGRPCUnreadAnswersUpstreamBounded(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCUnreadAnswersUpstreamBounded(t, tr) })
	}
}

func testGRPCUnreadAnswersUpstreamBounded(t *testing.T, transport string) {
	const streams, perStream = 8, 10000
	g := startGate(t, "-intake.wait=1s", "-ack=upstream", "-grpc.stream.answer-timeout=3s", "-batch.max-bytes=128KiB", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(2), streamWindow: 0})
	ids := grpcFloodAnswers(t, c, streams, perStream, func(id uint64) []byte { return grpcOTEPSpansRequest(t, id) })
	// While the streams are stalled and before the connection is closed: 3 goroutines a
	// stream, and those of gRPC's transport (reader, writer, keepalive).
	time.Sleep(time.Second)
	if !c.isClosed() {
		if n, maxG := grpcGoroutines(t, g), base+grpcSlack+3*streams; n > maxG {
			t.Errorf("%d goroutines with %d stalled streams, bound %d", n, streams, maxG)
		}
	}
	grpcAnswersNotTaken(t, g, c, ids)
	// Bound: the overhead, plus per stream 64 unsent answers (under 512 bytes each), the
	// requests it did not read (at most its 1 MiB window) and those admitted and owed an answer
	// (at most -grpc.stream.window, 256, of about 200 bytes, held twice: request and batch):
	// 8 streams, under 9 MiB; and the file destination, which decodes each batch to write it
	// as JSON (about 40 times the batch, -batch.max-bytes=128KiB: 5 MiB).
	grpcCheck(t, g, w, grpcOverhead+streams*(64*512+1<<20+256*2*256)+40*128<<10, base+grpcSlack, time.Second)
}

// grpcAnswersNotTaken is the end of an attack whose streams' answers are never taken (ids):
// on grpc-go's transport the connection is closed; on the own transport each stream is ended
// alone, RESOURCE_EXHAUSTED, and the connection stays open.
func grpcAnswersNotTaken(t *testing.T, g *gate, c *grpcRaw, ids []uint32) {
	t.Helper()
	if !grpcWaitFor(20*time.Second, func() bool {
		return c.isClosed() || g.metric(t, "otlpgate_grpc_stream_answer_timeouts_total") >= float64(len(ids))
	}) {
		t.Errorf("streams and connection still open 20 s after their answers stopped being taken")
	}
	if c.isClosed() {
		if v := g.metric(t, "otlpgate_grpc_closed_connections_total", `reason="answers_not_taken"`); v != 1 {
			t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"answers_not_taken\"} = %v, want 1", v)
		}
		return
	}
	if v := g.metric(t, "otlpgate_grpc_stream_answer_timeouts_total"); v != float64(len(ids)) {
		t.Errorf("otlpgate_grpc_stream_answer_timeouts_total = %v, want %d", v, len(ids))
	}
	if e := c.endings(); e["status:/8"] != len(ids) {
		t.Errorf("stream endings %v, want %d × status:/8 (RESOURCE_EXHAUSTED trailers)", e, len(ids))
	}
	if c.sync(5 * time.Second) {
		return // the connection serves on
	}
	t.Errorf("the connection did not answer a PING after its streams ended")
}

// grpcFloodAnswers opens streams OTEP streams on c and sends perStream requests on each, made
// by req, round-robin, for as long as the server reads them (up to 10 s): a stream whose window
// stays shut for a second is left alone. It returns the streams' ids.
func grpcFloodAnswers(t *testing.T, c *grpcRaw, streams, perStream int, req func(uint64) []byte) []uint32 {
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
				return ids // the connection closed
			default:
				open++
			}
		}
		if open == 0 {
			return ids
		}
	}
	return ids
}

// Finding 7: unfinished messages. gRPC reads a message into memory as its frames come, up to
// -grpc.max-recv-msg-size, and an OTEP stream's messages are not charged to the intake limiter:
// 32 streams each holding a 16 MiB message short of its last bytes held 549 MiB. Here 8
// connections of 4 streams each send 3.5 MiB of 4 MiB messages (112 MiB in all); each
// connection is closed once its unfinished messages hold more than -grpc.max-conn-recv-bytes
// (4 MiB) beyond each stream's initial window (-grpc.http2.stream-window, 1 MiB: what any
// client may park without the server reading). A connection that stays under it (one 3.5 MiB
// message) and one whose call sends headers and no body at all are closed at
// -grpc.recv-timeout (2 s). The own transport reserves each stream message's length from the
// intake limiter when its prefix comes, as it does a unary call's (-intake.max-conn-bytes per
// connection, -intake.max-bytes in all), so the messages it holds are bounded by the limiter,
// not by the connection cap: every connection is closed at -grpc.recv-timeout.
func TestGRPCUnfinishedMessagesBounded(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCUnfinishedMessagesBounded(t, tr) })
	}
}

func testGRPCUnfinishedMessagesBounded(t *testing.T, transport string) {
	const (
		maxMsg      = 4 << 20
		conns, per  = 8, 4
		partial     = maxMsg - maxMsg/8
		capPerConn  = 4 << 20
		window      = 1 << 20 // -grpc.http2.stream-window's default
		recvTimeout = 2 * time.Second
	)
	g := startGate(t, "-intake.wait=1s", "-grpc.max-recv-msg-size=4MiB", "-grpc.max-conn-recv-bytes=4MiB",
		"-grpc.recv-timeout="+recvTimeout.String(), "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	var all []*grpcRaw
	var wg sync.WaitGroup
	for i := range conns {
		c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(10 + i), streamWindow: -1})
		all = append(all, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if grpcPartialMessage(c, grpcOTEPStream, maxMsg, partial) != nil {
					return
				}
			}
		}()
	}
	under := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(20), streamWindow: -1})
	all = append(all, under)
	if err := grpcPartialMessage(under, grpcOTEPStream, maxMsg, partial); err != nil {
		t.Fatalf("partial message under the cap: %v", err)
	}
	bodiless := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(21), streamWindow: -1})
	all = append(all, bodiless)
	if _, err := bodiless.open(grpcHeaders(grpcV1Export), false); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, c := range all {
		if !grpcWaitFor(10*recvTimeout, c.isClosed) {
			t.Errorf("connection %d still open %v after its messages stopped", i, 10*recvTimeout)
		}
	}
	wantBytes, wantTimeout := float64(conns), 2.0
	if transport == "otlpgate" {
		wantBytes, wantTimeout = 0, conns+2
	}
	if v := g.metric(t, "otlpgate_grpc_closed_connections_total", `reason="recv_bytes"`); v != wantBytes {
		t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"recv_bytes\"} = %v, want %v", v, wantBytes)
	}
	if v := g.metric(t, "otlpgate_grpc_closed_connections_total", `reason="recv_timeout"`); v != wantTimeout {
		t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"recv_timeout\"} = %v, want %v", v, wantTimeout)
	}
	if v := g.metric(t, "otlpgate_grpc_unfinished_bytes"); v != 0 {
		t.Errorf("otlpgate_grpc_unfinished_bytes = %v after every connection closed, want 0", v)
	}
	// Bound: the overhead, plus per connection its cap, a window per stream and the frames that
	// crossed the cap (gRPC reads DATA into pooled 16 KiB buffers and does not copy a message
	// until it is whole; 64 KiB of slack): 10 connections, 80 MiB. Without the cap they held
	// 119 MiB, and for as long as the attacker liked. The own transport holds what the intake
	// limiter reserved for the messages (their lengths: 33 × 4 MiB, within -intake.max-bytes),
	// for -grpc.recv-timeout.
	bound := int64(grpcOverhead + (conns+2)*(capPerConn+per*window+64<<10))
	if transport == "otlpgate" {
		bound = grpcOverhead + (conns*per+1)*maxMsg + (conns+2)*(64<<10)
	}
	grpcCheck(t, g, w, bound, base+grpcSlack, time.Second)
}

// grpcPartialMessage opens a stream of method on c and sends the prefix of a msgLen-byte
// message and sendLen bytes of its body, as flow control allows, and no more.
func grpcPartialMessage(c *grpcRaw, method string, msgLen, sendLen int) error {
	id, err := c.open(grpcHeaders(method), false)
	if err != nil {
		return err
	}
	b := make([]byte, 5+sendLen)
	b[1], b[2], b[3], b[4] = byte(msgLen>>24), byte(msgLen>>16), byte(msgLen>>8), byte(msgLen)
	return c.sendBytes(id, b, false)
}

// Finding 7: idle connections. Connections used to live as long as their client kept them,
// so 4,096 idle ones took every slot of -grpc.max-connections and each new client waited in
// the accept backlog. Here one address opens 100 connections that send the HTTP/2 preface
// and nothing more, against -grpc.max-connections=64: -grpc.max-connections-per-peer=16 closes
// 84 as soon as they are accepted, a new client from another address is served meanwhile, and
// -grpc.max-connection-idle=1s closes the 16 that stayed. On either transport.
func TestGRPCIdleConnectionsBounded(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCIdleConnectionsBounded(t, tr) })
	}
}

func testGRPCIdleConnectionsBounded(t *testing.T, transport string) {
	const attempts, perPeer = 100, 16
	g := startGate(t, "-intake.wait=1s", "-grpc.max-connections=64", "-grpc.max-connections-per-peer=16",
		"-grpc.max-connection-idle=1s", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	var cs []*grpcRaw
	for range attempts {
		c, err := grpcTryDialRaw(g.GRPC, grpcRawOptions{local: grpcPeer(30), streamWindow: -1})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	open := func() int {
		n := 0
		for _, c := range cs {
			if !c.isClosed() {
				n++
			}
		}
		return n
	}
	refused := func() bool {
		return g.metric(t, "otlpgate_grpc_refused_connections_total", `reason="per_peer"`) >= attempts-perPeer
	}
	if !grpcWaitFor(10*time.Second, refused) {
		t.Errorf("otlpgate_grpc_refused_connections_total{reason=\"per_peer\"} = %v, want %d",
			g.metric(t, "otlpgate_grpc_refused_connections_total", `reason="per_peer"`), attempts-perPeer)
	}
	if err := grpcFreshExport(g, 5*time.Second); err != nil {
		t.Errorf("a new client was not served while the idle connections were open: %v", err)
	}
	if !grpcWaitFor(20*time.Second, func() bool { return open() == 0 }) {
		t.Errorf("%d idle connections still open 20 s later", open())
	}
	// Bound: the overhead, plus at most 16 idle HTTP/2 connections (read and write buffers of
	// 256 KiB each, gRPC's transport state): 8 MiB.
	grpcCheck(t, g, w, grpcOverhead+perPeer*(512<<10), base+grpcSlack, time.Second)
}

// grpcFreshExport makes one OTLP/gRPC Export on a new connection, within timeout.
func grpcFreshExport(g *gate, timeout time.Duration) error {
	conn, err := grpc.NewClient(g.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = coltracev1.NewTraceServiceClient(conn).Export(ctx, otlpgen.New(9).Spans(otlpgen.Shape{Spans: 2, Attrs: 1}))
	return err
}

// Rapid reset (CVE-2023-44487) held up in the review: 2.44 M HEADERS + RST_STREAM pairs in
// 20 s left RSS at 47 MiB. It must keep holding: here for up to 2 s (or 300,000 pairs) on one
// connection, each stream an OTLP v1 Export cancelled as soon as opened. On either transport:
// otlpgate's own spends no goroutine on a stream, and recycles each stream's state.
func TestGRPCRapidResetHolds(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCRapidResetHolds(t, tr) })
	}
}

func testGRPCRapidResetHolds(t *testing.T, transport string) {
	g := startGate(t, "-intake.wait=1s", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(40), streamWindow: -1})
	deadline := time.Now().Add(2 * time.Second)
	n := 0
	for ; n < 300_000 && time.Now().Before(deadline); n++ {
		id, err := c.open(grpcHeaders(grpcV1Export), false)
		if err != nil || c.reset(id) != nil {
			break
		}
	}
	t.Logf("%d HEADERS + RST_STREAM pairs", n)
	if !c.sync(30 * time.Second) {
		t.Fatalf("the server did not read the flood within 30 s")
	}
	// The cancelled calls end: goroutines come back to those of the idle server, the
	// well-behaved client and the attacker's connection.
	maxG := base + grpcSlack
	if !grpcWaitFor(10*time.Second, func() bool { return grpcGoroutines(t, g) <= maxG }) {
		t.Errorf("%d goroutines 10 s after the flood, bound %d", grpcGoroutines(t, g), maxG)
	}
	// Bound: the overhead, plus gRPC's state of the streams not yet cleaned up when the
	// flood was read (at most -grpc.max-concurrent-streams, 1,024, of a few KiB each: 16 MiB);
	// nothing of a cancelled call outlives it.
	grpcCheck(t, g, w, grpcOverhead+1024*(16<<10), maxG, time.Second)
}

// CONTINUATION floods (CVE-2024-27316) held up too: a header block that never ends is cut off
// once it passes -grpc.max-header-bytes, and the connection closed. Here: HEADERS without
// END_HEADERS, then 16 KiB CONTINUATION frames of indexed fields, until the server closes the
// connection (or 64 MiB were sent). On either transport: otlpgate's own bounds the block as
// sent (four times -grpc.max-header-bytes) and ends the connection with ENHANCE_YOUR_CALM.
func TestGRPCContinuationFloodHolds(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCContinuationFloodHolds(t, tr) })
	}
}

func testGRPCContinuationFloodHolds(t *testing.T, transport string) {
	g := startGate(t, "-intake.wait=1s", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	c := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(41), streamWindow: -1})
	frag := bytes.Repeat([]byte{0x82}, 16<<10) // indexed :method GET, 42 bytes decoded each
	if err := c.write(func() error {
		return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag})
	}); err != nil {
		t.Fatal(err)
	}
	sent := len(frag)
	for sent < 64<<20 && !c.isClosed() {
		if c.write(func() error { return c.fr.WriteContinuation(1, false, frag) }) != nil {
			break
		}
		sent += len(frag)
	}
	if !grpcWaitFor(10*time.Second, c.isClosed) {
		t.Errorf("connection still open after %d bytes of one header block", sent)
	}
	grpcCheck(t, g, w, grpcOverhead, base+grpcSlack, time.Second)
}

// Control-frame floods (CVE-2019-9512, CVE-2019-9515) on either transport. A client that pings
// without pause is told too_many_pings and closed (-grpc.keepalive.min-time, 10s: the third
// early PING); one that sends SETTINGS frames without pause and never reads their
// acknowledgements is held back by its own connection once the server's writes to it block,
// and costs no more than that connection's buffers. The well-behaved client is served
// throughout.
func TestGRPCControlFloodsHold(t *testing.T) {
	for _, tr := range grpcTransports {
		t.Run(tr, func(t *testing.T) { testGRPCControlFloodsHold(t, tr) })
	}
}

func testGRPCControlFloodsHold(t *testing.T, transport string) {
	g := startGate(t, "-intake.wait=1s", "-grpc.transport="+transport)
	w, base := grpcWitness(t, g)
	pinger := grpcDialRaw(t, g.GRPC, grpcRawOptions{local: grpcPeer(42), streamWindow: -1})
	for i := 0; i < 100_000 && !pinger.isClosed(); i++ {
		if pinger.write(func() error { return pinger.fr.WritePing(false, [8]byte{byte(i)}) }) != nil {
			break
		}
	}
	if !grpcWaitFor(10*time.Second, pinger.isClosed) || pinger.goaways.Load() == 0 {
		t.Errorf("the pinging connection was not ended with a GOAWAY (closed %v, %d GOAWAYs)", pinger.isClosed(), pinger.goaways.Load())
	}
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(grpcPeer(43))}}
	conn, err := d.Dial("tcp", g.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	flood := []byte(http2.ClientPreface)
	for range 1 << 16 {
		flood = append(flood, 0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0) // an empty SETTINGS
	}
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	sent, _ := conn.Write(flood) // it stops when the server stops reading
	t.Logf("SETTINGS flood: %d of %d bytes taken", sent, len(flood))
	// Bound: the overhead, plus the flooding connection's read and write buffers.
	grpcCheck(t, g, w, grpcOverhead+4<<20, base+grpcSlack, time.Second)
}
