package grpcserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
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
				if tc.window && tr == TransportGRPCGo {
					// grpc-go's handler and its transport race at the deadline: most often the
					// transport resets the stream (CANCEL), but the handler's trailers may also be
					// queued behind the answer the closed window holds, for as long as it stays
					// closed. Past the deadline the window is given back, which lets such a held
					// end out and changes nothing for a stream already reset.
					d, err := time.ParseDuration(strings.TrimSuffix(tc.timeout, "m") + "ms")
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(d + time.Second)
					c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 16})
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
			// With the window closed, grpc-go's held end (above) comes out once it opens: the
			// answer, then the trailers.
			held := streamEnd{ids: []uint64{1}, st: exceeded, reset: http2.ErrCodeNo}
			if g := got[0].String(); g != tc.want.String() && (tc.counted == 0 || g != cancelled.String()) && (!tc.window || g != held.String()) {
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

const otepUnaryTracesPath = "/otlpgate.otep.v1.UnaryExporter/ExportTraces"

// openCall opens stream id with a call of path and the extra header fields, its END_STREAM
// set when end.
func (c *h2Client) openCall(t *testing.T, id uint32, path string, end bool, extra ...h2.HeaderField) {
	t.Helper()
	block := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", path, "", "test", extra...)...)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true, EndStream: end}); err != nil {
		t.Fatal(err)
	}
}

// callEnd is how a unary call ended, as its client saw it on the wire: the :status of its
// response headers ("" when none came), the DATA it received, the status of its trailers
// (nil: none came) with its grpc-status-details-bin as sent, and the code of the RST_STREAM
// that followed or took their place (noReset: none).
type callEnd struct {
	httpStatus string
	data       []byte
	st         *status.Status
	details    string
	reset      http2.ErrCode
}

func (e callEnd) String() string {
	s := "<nil>"
	if e.st != nil {
		s = fmt.Sprintf("%v %q details %q", e.st.Code(), e.st.Message(), e.details)
	}
	return fmt.Sprintf(":status %q, data %x, trailers %s, reset %v", e.httpStatus, e.data, s, e.reset)
}

// detailsOf is err's grpc-status-details-bin, as both transports send it.
func detailsOf(t *testing.T, err error) string {
	t.Helper()
	b, merr := proto.Marshal(status.Convert(err).Proto())
	if merr != nil {
		t.Fatal(merr)
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// readCallEnd reads the frames of stream id until the call ended: a RST_STREAM, or trailers
// followed, when the client's side is still open, by a reset. Frames of other streams (and
// of the connection) are passed over.
func (c *h2Client) readCallEnd(t *testing.T, id uint32, clientOpen bool) callEnd {
	t.Helper()
	end := callEnd{reset: noReset}
	for {
		f := c.next(t)
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY %v %q", ga.ErrCode, ga.DebugData())
		}
		if f.Header().StreamID != id {
			continue
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			end.data = append(end.data, f.Data()...)
		case *http2.MetaHeadersFrame:
			if v := f.PseudoValue("status"); v != "" {
				end.httpStatus = v
			}
			if !f.StreamEnded() {
				continue
			}
			code := codes.Unknown
			for _, hf := range f.RegularFields() {
				switch hf.Name {
				case "grpc-status":
					var n int
					fmt.Sscan(hf.Value, &n)
					code = codes.Code(n)
				case "grpc-status-details-bin":
					end.details = hf.Value
				}
			}
			end.st = status.New(code, decodedMessage(f))
			if !clientOpen {
				return end
			}
		case *http2.RSTStreamFrame:
			end.reset = f.ErrCode
			return end
		}
	}
}

// A unary call's grpc-timeout is its deadline on both transports (v1 Export and the OTEP
// UnaryExporter). When it passes before the call was answered, the call ends as grpc-go's
// handler ends it: a message still arriving is dropped (trailers-only DEADLINE_EXCEEDED, the
// client's open side reset with NO_ERROR, the reservation of the intake limiter given back at
// once), a wait for the limiter's room is refused RESOURCE_EXHAUSTED as the limiter refuses,
// a wait for the upstream (-ack=upstream) ends as that wait's end is answered, and an answer
// held back by the client's window is reset with CANCEL. grpc-go's transport may reset the
// call with CANCEL first instead (its second timer), which the test accepts of it alone. A
// deadline that passed before the call began ("0m") is refused DEADLINE_EXCEEDED, and a
// malformed grpc-timeout INTERNAL with :status 400, on both, with the same words. Every case
// delivers exactly the spans of the requests admitted before the deadline (none for a call
// cut while its message arrived), and the connection serves the next call.
func TestUnaryDeadline(t *testing.T) {
	body := traceBody(t, 4, 3)
	next := traceBody(t, 5, 2) // the call that follows on the same connection
	v1Msg := grpcMessage(body)
	otepMsg := grpcMessage(otepReq(t, 1, body))
	exceeded := status.New(codes.DeadlineExceeded, "context deadline exceeded")
	internal := func(why string) *status.Status {
		return status.New(codes.Internal, "malformed grpc-timeout: "+why)
	}
	retryable, _ := (&otepv1.ExportResponse{Id: 1, ResultCode: otepv1.ResultCode_FailedRetryable}).MarshalVT()
	const limit = 4 << 20
	for _, tc := range []struct {
		name    string
		path    string
		timeout string
		send    []byte // the message bytes sent after the headers
		end     bool   // the last DATA frame (or, without send, the headers) ends the client's side
		full    bool   // the intake limiter is full: the message waits for its room
		hold    bool   // -ack=upstream, and the upstream holds every batch
		window  bool   // the client gives the server no window until the deadline passed
		early   bool   // refused at the headers, before the message that still comes
		want    callEnd
		counted float64 // otlpgate_grpc_unary_deadlines_total, own transport
		admit   bool    // the request was admitted before its deadline: its spans are delivered
	}{
		// Cut while the message arrives (or before it began): nothing is admitted.
		{name: "v1-unfinished", path: tracesPath, timeout: "200m", send: v1Msg[:len(v1Msg)/2],
			want: callEnd{httpStatus: "200", st: exceeded, reset: http2.ErrCodeNo}, counted: 1},
		{name: "v1-no-message", path: tracesPath, timeout: "100m",
			want: callEnd{httpStatus: "200", st: exceeded, reset: http2.ErrCodeNo}, counted: 1},
		{name: "v1-prefix-only", path: tracesPath, timeout: "100m", send: v1Msg[:5],
			want: callEnd{httpStatus: "200", st: exceeded, reset: http2.ErrCodeNo}, counted: 1},
		{name: "otep-unfinished", path: otepUnaryTracesPath, timeout: "200m", send: otepMsg[:len(otepMsg)-1],
			want: callEnd{httpStatus: "200", st: exceeded, reset: http2.ErrCodeNo}, counted: 1},
		// The whole message came, and waits for the limiter's room past the deadline.
		{name: "v1-waiting-room", path: tracesPath, timeout: "200m", send: v1Msg, end: true, full: true,
			want: callEnd{httpStatus: "200", reset: noReset}, counted: 1},
		// Admitted, and waiting for the upstream at the deadline.
		{name: "v1-ack-upstream", path: tracesPath, timeout: "200m", send: v1Msg, end: true, hold: true,
			want: callEnd{httpStatus: "200", st: exceeded, reset: noReset}, counted: 1, admit: true},
		{name: "otep-ack-upstream", path: otepUnaryTracesPath, timeout: "200m", send: otepMsg, end: true, hold: true,
			want: callEnd{httpStatus: "200", data: grpcMessage(retryable), st: status.New(codes.OK, ""), reset: noReset}, counted: 1, admit: true},
		// Answered before the deadline, the answer held back by the client's window until
		// after it: the answer goes out once the window comes.
		{name: "v1-window-closed", path: tracesPath, timeout: "100m", send: v1Msg, end: true, window: true,
			want: callEnd{httpStatus: "200", data: grpcMessage(nil), st: status.New(codes.OK, ""), reset: noReset}, admit: true},
		// A deadline already passed when the call begins.
		{name: "v1-passed", early: true, path: tracesPath, timeout: "0m", send: v1Msg, end: true,
			want: callEnd{httpStatus: "200", st: exceeded, reset: http2.ErrCodeNo}},
		{name: "otep-passed", early: true, path: otepUnaryTracesPath, timeout: "0S", send: otepMsg, end: true,
			want: callEnd{httpStatus: "200", st: exceeded, reset: http2.ErrCodeNo}},
		{name: "v1-passed-no-message", path: tracesPath, timeout: "0n", end: true,
			want: callEnd{httpStatus: "200", st: exceeded, reset: noReset}},
		// Malformed, each reason grpc-go tells apart.
		{name: "malformed-unit", early: true, path: tracesPath, timeout: "10x", send: v1Msg, end: true,
			want: callEnd{httpStatus: "400", st: internal(`transport: timeout unit is not recognized: "10x"`), reset: http2.ErrCodeNo}},
		{name: "malformed-short", early: true, path: tracesPath, timeout: "m", send: v1Msg, end: true,
			want: callEnd{httpStatus: "400", st: internal(`transport: timeout string is too short: "m"`), reset: http2.ErrCodeNo}},
		{name: "malformed-long", early: true, path: otepUnaryTracesPath, timeout: "123456789m", send: otepMsg, end: true,
			want: callEnd{httpStatus: "400", st: internal(`transport: timeout string is too long: "123456789m"`), reset: http2.ErrCodeNo}},
		{name: "malformed-digits", early: true, path: tracesPath, timeout: "1a2S", send: v1Msg, end: true,
			want: callEnd{httpStatus: "400", st: internal(`strconv.ParseUint: parsing "1a2": invalid syntax`), reset: http2.ErrCodeNo}},
		{name: "malformed-ended", path: tracesPath, timeout: "-1S", end: true,
			want: callEnd{httpStatus: "400", st: internal(`strconv.ParseUint: parsing "-1": invalid syntax`), reset: noReset}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]callEnd
			var delivered [2][]byte
			for i, tr := range transports {
				rec := testkit.NewRecorder("recorder")
				pc := testPipelineConfig()
				if tc.hold {
					pc.Ack, pc.Eager = pipeline.AckUpstream, true
					rec.SetHold(true)
				}
				sc := configFor(tr)
				sc.MaxRecvMsgSize = limit
				sc.Limiter = admission.NewLimiter(admission.LimiterConfig{MaxBytes: limit, MaxDecodes: 2, Wait: time.Minute})
				var filled int64
				if tc.full {
					if !sc.Limiter.AcquireBytes(admission.IntakeGRPC, limit, nil) {
						t.Fatal("cannot fill the limiter")
					}
					filled = limit
				}
				e := start(t, pc, sc, rec)
				if tc.full {
					// The limiter's refusal, with its RetryInfo, as the intake answers it.
					busy := e.srv.busy()
					tc.want.st, tc.want.details = status.Convert(busy), detailsOf(t, busy)
				}
				labels := []string{"protocol", kindNames[kindV1]}
				if tc.path == otepUnaryTracesPath {
					labels[1] = kindNames[kindOTEPUnary]
				}
				before := testkit.Counter(t, "otlpgate_grpc_unary_deadlines_total", labels...)
				c := dialH2Client(t, e.srv.Addr().String())
				if tc.window {
					c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
				}
				c.openCall(t, 1, tc.path, tc.end && len(tc.send) == 0, h2.HeaderField{Name: "grpc-timeout", Value: tc.timeout})
				if len(tc.send) > 0 {
					if err := c.fr.WriteData(1, tc.end, tc.send); err != nil {
						t.Fatal(err)
					}
				}
				if tc.window {
					// The answer's DATA waits for the window until the deadline passed.
					d, _ := parseGRPCTimeout([]byte(tc.timeout))
					time.Sleep(3 * d)
					c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 16})
				}
				got[i] = c.readCallEnd(t, 1, !tc.end || tc.early)
				// What the call reserved of the intake limiter (and of the connection's share)
				// is given back: on the own transport before its end is written, on grpc-go
				// once its handler returns.
				if tr == TransportOwn {
					if n := sc.Limiter.Bytes(); n != filled {
						t.Errorf("the intake limiter holds %d bytes after the call's end, want %d", n, filled)
					}
				} else if !waitUntil(10*time.Second, func() bool { return sc.Limiter.Bytes() == filled }) {
					t.Errorf("grpc-go: the intake limiter holds %d bytes after the call's end, want %d", sc.Limiter.Bytes(), filled)
				}
				if tr == TransportOwn {
					if n := testkit.Counter(t, "otlpgate_grpc_unary_deadlines_total", labels...) - before; n != tc.counted {
						t.Errorf("otlpgate_grpc_unary_deadlines_total rose by %v, want %v", n, tc.counted)
					}
				}
				if tc.full {
					sc.Limiter.ReleaseBytes(admission.IntakeGRPC, limit)
				}
				if tc.hold {
					rec.Release(true)
				}
				// The connection serves on: the next call is answered.
				c.call(t, 3, grpcMessage(next), true)
				answered := callEnd{httpStatus: "200", data: grpcMessage(nil), st: status.New(codes.OK, ""), reset: noReset}
				if a := c.readCallEnd(t, 3, false); a.String() != answered.String() {
					t.Fatalf("%s: the call after: %v; want %v", tr, a, answered)
				}
				e.p.Flush()
				for _, r := range rec.Received() {
					delivered[i] = append(delivered[i], r.Body...)
				}
			}
			if got[1].String() != tc.want.String() {
				t.Fatalf("otlpgate: %v\nwant %v", got[1], tc.want)
			}
			// grpc-go's transport may reset the call at its deadline before its handler ends it.
			if got[0].String() != tc.want.String() && (tc.counted == 0 || got[0].st != nil || got[0].reset != http2.ErrCodeCancel) {
				t.Fatalf("grpc-go: %v\nwant %v, or a reset with CANCEL", got[0], tc.want)
			}
			want := next
			if tc.admit {
				want = append(append([]byte(nil), body...), next...)
			}
			for i, tr := range transports {
				if !bytes.Equal(delivered[i], want) {
					t.Errorf("%s: the destination got %d bytes, want %d (the spans admitted before the deadline, and the next call's)", tr, len(delivered[i]), len(want))
				}
			}
			t.Logf("grpc-go: %v", got[0])
		})
	}
}

// A grpc-go client's unary calls whose deadline passes while they wait for the upstream
// (-ack=upstream) end on both transports, DEADLINE_EXCEEDED (an OTEP call perhaps
// FailedRetryable, the server's answer at its deadline, when it beats the client's); the own
// server lets go of them, and the connection serves the next calls.
func TestUnaryDeadlineGRPCClient(t *testing.T) {
	body := traceBody(t, 6, 3)
	onTransports(t, func(t *testing.T, tr string) {
		rec := testkit.NewRecorder("recorder")
		rec.SetHold(true)
		pc := testPipelineConfig()
		pc.Ack, pc.Eager = pipeline.AckUpstream, true
		e := start(t, pc, configFor(tr), rec)
		invoke := func(timeout time.Duration, path string, req []byte, resp any) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return e.raw.Invoke(ctx, path, rawBytes(req).raw(), resp)
		}
		var resp otepv1.ExportResponse
		call := func(timeout time.Duration) (v1, otep error) {
			resp.Reset()
			return invoke(timeout, tracesPath, body, &coltracev1.ExportTraceServiceResponse{}),
				invoke(timeout, otepUnaryTracesPath, otepReq(t, 9, body), &resp)
		}
		// The server's answer at its deadline (DEADLINE_EXCEEDED on v1, FailedRetryable on
		// OTEP) and the client's own deadline come at about the same time: the OTEP client sees
		// whichever comes first.
		v1, otep := call(300 * time.Millisecond)
		if status.Code(v1) != codes.DeadlineExceeded ||
			status.Code(otep) != codes.DeadlineExceeded && (otep != nil || resp.ResultCode != otepv1.ResultCode_FailedRetryable) {
			t.Fatalf("v1 %v, OTEP %v %v; want DEADLINE_EXCEEDED, on OTEP or FailedRetryable", v1, otep, &resp)
		}
		rec.Release(true)
		if v1, otep := call(time.Minute); v1 != nil || otep != nil {
			t.Fatalf("the calls after: v1 %v, OTEP %v", v1, otep)
		}
		// Both requests of each round were admitted: 4 batches of the same spans.
		if got := rec.Received(); len(got) != 4 {
			t.Fatalf("%d batches delivered, want 4", len(got))
		} else {
			for _, r := range got {
				if !bytes.Equal(r.Body, body) {
					t.Fatalf("a batch of %d bytes, want the request's %d", len(r.Body), len(body))
				}
			}
		}
		if tr != TransportOwn {
			return
		}
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
