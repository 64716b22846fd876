package grpcserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// openStream opens an OTEP trace stream on stream id with the extra header fields.
func (c *h2Client) openStream(t *testing.T, id uint32, extra ...h2.HeaderField) {
	t.Helper()
	block := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", streamTracesPath, "", "test", extra...)...)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// streamEnd is how a stream ended, as its client saw it on the wire: the ids answered, the
// status of its trailers (nil: none came), and the code of the RST_STREAM that followed or
// took their place (noReset: none).
type streamEnd struct {
	ids   []uint64
	st    *status.Status
	reset http2.ErrCode
}

const noReset = http2.ErrCode(1<<32 - 1)

func (e streamEnd) String() string {
	return fmt.Sprintf("answered %v, trailers %v, reset %v", e.ids, e.st, e.reset)
}

// readStreamEnd reads stream id's frames until it ended: a RST_STREAM, or trailers with
// END_STREAM followed, when the client's side is still open, by a reset; each answer must be
// Success.
func (c *h2Client) readStreamEnd(t *testing.T, id uint32, clientOpen bool) streamEnd {
	t.Helper()
	end := streamEnd{reset: noReset}
	var data []byte
	for {
		switch f := c.next(t).(type) {
		case *http2.DataFrame:
			data = append(data, f.Data()...)
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // the response headers
			}
			code := codes.Unknown
			if v := f.PseudoValue("status"); v != "" && v != "200" { // trailers-only have one
				t.Fatalf("trailers with :status %q", v)
			}
			for _, hf := range f.RegularFields() {
				if hf.Name == "grpc-status" {
					var n int
					fmt.Sscan(hf.Value, &n)
					code = codes.Code(n)
				}
			}
			end.st = status.New(code, decodedMessage(f))
			if !clientOpen {
				return end.parse(t, data)
			}
		case *http2.RSTStreamFrame:
			if f.StreamID != id {
				t.Fatalf("reset of stream %d", f.StreamID)
			}
			end.reset = f.ErrCode
			return end.parse(t, data)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		}
	}
}

// decodedMessage is the grpc-message of trailers, percent-decoded as grpc-go decodes it.
func decodedMessage(f *http2.MetaHeadersFrame) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == "grpc-message" {
			return status.Convert(status.Error(codes.Unknown, hf.Value)).Message()
		}
	}
	return ""
}

// parse reads the answers out of the stream's DATA bytes.
func (e streamEnd) parse(t *testing.T, data []byte) streamEnd {
	t.Helper()
	for len(data) > 0 {
		if len(data) < 5 {
			t.Fatalf("a message cut short: %x", data)
		}
		n := int(binary.BigEndian.Uint32(data[1:]))
		var resp otepv1.ExportResponse
		if err := resp.UnmarshalVT(data[5 : 5+n]); err != nil {
			t.Fatal(err)
		}
		if resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("id %d answered %v", resp.Id, resp.ResultCode)
		}
		e.ids = append(e.ids, resp.Id)
		data = data[5+n:]
	}
	return e
}

// An OTEP stream's grpc-timeout is its deadline on both transports. When it passes the call
// ends: what was answered stays answered, an unfinished message is dropped. grpc-go ends it
// one of two ways, whichever of its timers comes first (its handler's context, then trailers
// with DEADLINE_EXCEEDED and a reset with NO_ERROR; or its transport's, a reset with CANCEL);
// the own transport always sends the trailers, which tell a client without a deadline of its
// own why its call ended. A deadline that passed before the call began ("0m") is refused
// trailers-only with DEADLINE_EXCEEDED on both, the stream reset once answered. The
// destination gets the same bytes on both.
func TestOTEPStreamDeadline(t *testing.T) {
	body := traceBody(t, 4, 3)
	whole := grpcMessage(otepReq(t, 1, body))
	unfinished := grpcMessage(otepReq(t, 2, body))
	unfinished = unfinished[:len(unfinished)/2]
	exceeded := status.New(codes.DeadlineExceeded, "context deadline exceeded")
	for _, tc := range []struct {
		name    string
		timeout string
		send    [][]byte
		window  bool      // the client gives the server no window: answers cannot leave
		hold    bool      // -ack=upstream, and the upstream holds every batch
		want    streamEnd // on the own transport, and on grpc-go when its handler ends the call
		counted float64   // otlpgate_grpc_stream_deadlines_total, own transport
	}{
		// A message answered, then one the deadline cuts short.
		{"passes", "300m", [][]byte{whole, unfinished}, false, false, streamEnd{ids: []uint64{1}, st: exceeded, reset: http2.ErrCodeNo}, 1},
		{"passes-idle", "100m", nil, false, false, streamEnd{st: exceeded, reset: http2.ErrCodeNo}, 1},
		// The answer waits for the upstream when the deadline passes: it is not sent.
		{"ack-upstream", "200m", [][]byte{whole}, false, true, streamEnd{st: exceeded, reset: http2.ErrCodeNo}, 1},
		// The answer waits for a window that never comes, and the trailers behind it: both
		// transports reset the stream.
		{"window-closed", "200m", [][]byte{whole}, true, false, streamEnd{reset: http2.ErrCodeCancel}, 1},
		{"passed", "0m", [][]byte{whole}, false, false, streamEnd{st: exceeded, reset: http2.ErrCodeNo}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]streamEnd
			var delivered [2][]byte
			for i, tr := range transports {
				rec := testkit.NewRecorder("recorder")
				pc := testPipelineConfig()
				if tc.hold {
					pc.Ack, pc.Eager = pipeline.AckUpstream, true
					rec.SetHold(true)
				}
				e := start(t, pc, configFor(tr), rec)
				before := testkit.Counter(t, "otlpgate_grpc_stream_deadlines_total")
				c := dialH2Client(t, e.srv.Addr().String())
				if tc.window {
					c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
				}
				c.openStream(t, 1, h2.HeaderField{Name: "grpc-timeout", Value: tc.timeout})
				for _, m := range tc.send {
					if err := c.fr.WriteData(1, false, m); err != nil {
						t.Fatal(err)
					}
				}
				got[i] = c.readStreamEnd(t, 1, true)
				if tc.hold {
					rec.SetHold(false)
					rec.Release(true)
				}
				e.p.Flush()
				for _, r := range rec.Received() {
					delivered[i] = append(delivered[i], r.Body...)
				}
				if tr == TransportOwn {
					if n := testkit.Counter(t, "otlpgate_grpc_stream_deadlines_total") - before; n != tc.counted {
						t.Errorf("otlpgate_grpc_stream_deadlines_total rose by %v, want %v", n, tc.counted)
					}
				}
				// The connection serves on: a unary call after the stream's end is answered.
				// (grpc-go may reset stream 1 twice: once by each of its timers.)
				if tc.window {
					c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 16})
				}
				c.call(t, 3, grpcMessage(body), true)
				f := c.next(t)
				for f.Header().StreamID == 1 || f.Header().StreamID == 0 {
					f = c.next(t)
				}
				if h, ok := f.(*http2.MetaHeadersFrame); !ok || h.StreamID != 3 || h.StreamEnded() {
					t.Fatalf("%s: the call after the stream's end: %v", tr, f)
				}
			}
			if got[1].String() != tc.want.String() {
				t.Fatalf("otlpgate: %v; want %v", got[1], tc.want)
			}
			cancelled := streamEnd{ids: tc.want.ids, reset: http2.ErrCodeCancel}
			if g := got[0].String(); g != tc.want.String() && (tc.counted == 0 || g != cancelled.String()) {
				t.Fatalf("grpc-go: %v; want %v or %v", got[0], tc.want, cancelled)
			}
			if !bytes.Equal(delivered[0], delivered[1]) || (len(tc.send) > 0 && tc.counted > 0) != (len(delivered[1]) > 0) {
				t.Fatalf("destination: grpc-go %d bytes, otlpgate %d bytes", len(delivered[0]), len(delivered[1]))
			}
			t.Logf("grpc-go: %v", got[0])
		})
	}
}

// A grpc-go client's OTEP stream with a deadline ends DEADLINE_EXCEEDED on both transports,
// after its answers; the own server lets go of it (its reset counted).
func TestOTEPStreamDeadlineGRPCClient(t *testing.T) {
	onTransports(t, func(t *testing.T, tr string) {
		e := start(t, testPipelineConfig(), configFor(tr), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		s, err := e.raw.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, streamTracesPath)
		if err != nil {
			t.Fatal(err)
		}
		sendRaw(t, s, otepReq(t, 7, traceBody(t, 5, 2)))
		resp, err := recvResp(t, s)
		if err != nil || resp.Id != 7 {
			t.Fatalf("answer %v, %v", resp, err)
		}
		_, err = drainEOF(s)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("stream ended with %v, want DEADLINE_EXCEEDED", err)
		}
		if tr != TransportOwn {
			return
		}
		// The client's own deadline resets the stream (CANCEL) at about the server's: either
		// way the stream is gone from the connection.
		open := func() (n int) {
			e.srv.h2.each(func(c *h2Conn) {
				c.mu.Lock()
				n += len(c.mu.streams)
				c.mu.Unlock()
			})
			return n
		}
		if !waitUntil(10*time.Second, func() bool { return open() == 0 }) {
			t.Fatalf("%d streams still open on the server", open())
		}
	})
}

// waitUntil polls cond every few milliseconds until it holds or within passes.
func waitUntil(within time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
