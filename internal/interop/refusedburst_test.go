package interop

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/otlpgate/otlpgate/internal/strictsink"
)

// A client that opens more streams than -grpc.max-concurrent-streams before the server's
// SETTINGS reach it, as h2load and other nghttp2 clients do at connection start: here 40
// calls, each its HEADERS and then its DATA, against a limit of 4. The server refuses the
// streams past the limit (RST_STREAM REFUSED_STREAM), and the DATA the client already sent on
// them must be ignored (RFC 9113 §5.1, "closed": frames in flight on a stream the endpoint
// reset); the first four calls are answered and the connection lives, on both transports.
//
// The own transport (-grpc.transport=otlpgate) remembers only its last 16 resets
// (h2Conn.resets in server/grpc/h2conn.go); it used to take the DATA of a stream refused
// earlier than that for a connection error and end the whole connection with GOAWAY
// STREAM_CLOSED, every call on it lost (h2load -m 64 against -grpc.max-concurrent-streams 4
// lost all of its calls about one run in two). Such DATA is now a stream error.
func TestRefusedStreamsBurst(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			sink, err := strictsink.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sink.Close)
			g := startGate(t, "-grpc.transport", tr, "-grpc.max-concurrent-streams", "4",
				"-dest", "name=up,endpoint="+sink.Addr()+",protocol=v1,retry-initial=20ms")
			const calls = 160 // 156 refused: more than the own transport remembers (128)
			conn, fr := rawCalls(t, g.GRPC, calls)
			defer conn.Close()
			for i := range calls {
				body := h2loadRun{encoding: "identity", first: uint64(1 + i), spans: 1}.grpcBody(t)
				if err := fr.WriteData(uint32(1+2*i), true, body); err != nil {
					t.Fatal(err)
				}
			}
			// A PING after everything: the server handles frames in order, so its ack comes
			// once it has handled every DATA frame, and a GOAWAY they caused comes before it.
			ping := [8]byte{'i', 'n', 't', 'e', 'r', 'o', 'p'}
			if err := fr.WritePing(false, ping); err != nil {
				t.Fatal(err)
			}
			answered, refused, acked, closedAgain := map[uint32]bool{}, map[uint32]bool{}, false, 0
			for len(answered)+len(refused) < calls || !acked {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("after %d calls answered and %d refused, the connection ended: %v", len(answered), len(refused), err)
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						fr.WriteSettingsAck()
					}
				case *http2.PingFrame:
					if !f.IsAck() {
						fr.WritePing(true, f.Data)
					} else if f.Data == ping {
						acked = true
					}
				case *http2.HeadersFrame:
					if f.StreamEnded() {
						answered[f.StreamID] = true
					}
				case *http2.RSTStreamFrame:
					// A second reset of a refused stream, STREAM_CLOSED for its DATA, is what
					// the own transport answers once the refusal is older than the resets it
					// remembers: the client has forgotten the stream and ignores it.
					if f.ErrCode == http2.ErrCodeStreamClosed && refused[f.StreamID] {
						closedAgain++
						continue
					}
					if f.ErrCode != http2.ErrCodeRefusedStream {
						t.Fatalf("stream %d reset with %v, want REFUSED_STREAM", f.StreamID, f.ErrCode)
					}
					refused[f.StreamID] = true
				case *http2.GoAwayFrame:
					t.Fatalf("after %d calls answered and %d refused, GOAWAY %v (last stream %d, %q): the connection ends with the calls on it",
						len(answered), len(refused), f.ErrCode, f.LastStreamID, f.DebugData())
				}
			}
			if len(answered) != 4 || len(refused) != calls-4 {
				t.Errorf("%d calls answered and %d refused, want 4 and %d", len(answered), len(refused), calls-4)
			}
			t.Logf("%d calls answered, %d refused, %d of those reset again for their DATA", len(answered), len(refused), closedAgain)
			var w want
			w.spans = map[uint64]int{}
			for id := range answered {
				w.spans[uint64(id+1)/2] = 1
			}
			checkSink(t, sink, w)
		})
	}
}

// rawCalls dials addr, writes the client preface and SETTINGS and the HEADERS of n unary
// trace Export calls on streams 1, 3, 5..., without waiting for anything from the server.
func rawCalls(t *testing.T, addr string, n int) (net.Conn, *http2.Framer) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(conn, conn)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := range n {
		// Encoded in order by one encoder: after the first, the fields are indexes into the
		// table the server keeps (it decodes a refused stream's block too).
		hb.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: "/opentelemetry.proto.collector.trace.v1.TraceService/Export"}, {Name: ":authority", Value: addr},
			{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
			enc.WriteField(f)
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	return conn, fr
}

// 20 calls on one connection whose messages each announce 2 MiB against
// -grpc.max-recv-msg-size 1MiB, their first DATA frames and then a second one each, as a
// client multiplexing large exports sends them: every call is refused on its own
// (RESOURCE_EXHAUSTED, or its stream reset) and the connection lives. The own transport resets
// each stream at its prefix; past 16 resets it used to take the second DATA frame of an early
// one for a connection error (GOAWAY STREAM_CLOSED, every other call on the connection lost).
func TestTooLargeMessagesBurst(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			sink, err := strictsink.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sink.Close)
			g := startGate(t, "-grpc.transport", tr, "-grpc.max-recv-msg-size", "1MiB",
				"-dest", "name=up,endpoint="+sink.Addr()+",protocol=v1,retry-initial=20ms")
			const calls = 20
			conn, fr := rawCalls(t, g.GRPC, calls)
			defer conn.Close()
			chunk := make([]byte, 16000)
			for i := range calls {
				if err := fr.WriteData(uint32(1+2*i), false, append(binary.BigEndian.AppendUint32([]byte{0}, 2<<20), chunk...)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range calls {
				if err := fr.WriteData(uint32(1+2*i), false, chunk); err != nil {
					t.Fatal(err)
				}
			}
			ping := [8]byte{'i', 'n', 't', 'e', 'r', 'o', 'p'}
			if err := fr.WritePing(false, ping); err != nil {
				t.Fatal(err)
			}
			done, acked := map[uint32]bool{}, false
			for len(done) < calls || !acked {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("after %d calls refused, the connection ended: %v", len(done), err)
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						fr.WriteSettingsAck()
					}
				case *http2.PingFrame:
					if !f.IsAck() {
						fr.WritePing(true, f.Data)
					} else if f.Data == ping {
						acked = true
					}
				case *http2.HeadersFrame:
					if f.StreamEnded() {
						done[f.StreamID] = true
					}
				case *http2.RSTStreamFrame:
					done[f.StreamID] = true
				case *http2.GoAwayFrame:
					t.Fatalf("after %d calls refused, GOAWAY %v (last stream %d, %q): the connection ends with the calls on it",
						len(done), f.ErrCode, f.LastStreamID, f.DebugData())
				}
			}
		})
	}
}
