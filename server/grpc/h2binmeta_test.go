package grpcserver

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// openCallIndexed opens stream id with a call of path and the extra fields, encoded by enc,
// the connection's own HPACK encoder: a field it sent before is named from the server's
// dynamic table. (The blocks of openCall and call leave that table as it is.)
func (c *h2Client) openCallIndexed(t *testing.T, enc *hpack.Encoder, buf *bytes.Buffer, id uint32, path string, end bool, extra ...hpack.HeaderField) {
	t.Helper()
	buf.Reset()
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: path}, {Name: ":authority", Value: "otlpgate"}, {Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"}, {Name: "user-agent", Value: "test"}}, extra...) {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: end}); err != nil {
		t.Fatal(err)
	}
}

// A call whose metadata has a field named *-bin whose value is not base64 as grpc-go decodes
// it (padded when its length is a multiple of 4, unpadded otherwise) is refused on both
// transports, with the same frames: trailers-only with :status 400 and INTERNAL "malformed
// binary metadata ...", in grpc-go's words, and a reset with NO_ERROR when the client's side
// is still open; v1 Export, OTEP UnaryExporter and StreamExporter alike, the value literal or
// Huffman-coded, sent once or named again from the dynamic table. With a malformed
// grpc-timeout as well, the field that comes last gives the words. Valid values, padded or
// not, are served. The connection serves the next call, and the destination gets only what
// was served.
func TestMalformedBinaryMetadata(t *testing.T) {
	body := traceBody(t, 4, 3)
	next := traceBody(t, 5, 2) // the call that follows on the same connection
	v1Msg := grpcMessage(body)
	otepMsg := grpcMessage(otepReq(t, 1, body))
	otepOK, _ := (&otepv1.ExportResponse{Id: 1, ResultCode: otepv1.ResultCode_Success}).MarshalVT()
	malformed := func(msg string) callEnd {
		return callEnd{httpStatus: "400", st: status.New(codes.Internal, "malformed binary metadata "+msg), reset: http2.ErrCodeNo}
	}
	served := callEnd{httpStatus: "200", data: grpcMessage(nil), st: status.New(codes.OK, ""), reset: noReset}
	bin := func(name, value string) hpack.HeaderField { return hpack.HeaderField{Name: name, Value: value} }
	for _, tc := range []struct {
		name   string
		path   string
		fields []hpack.HeaderField
		send   []byte // the message, sent after the headers with END_STREAM; none: the headers end the call
		twice  bool   // the call is made again on the same connection, its fields named from the table
		want   callEnd
	}{
		{name: "v1-unpadded", path: tracesPath, fields: []hpack.HeaderField{bin("x-trace-bin", "YQ=")}, send: v1Msg,
			want: malformed(`"YQ=" in header "x-trace-bin": illegal base64 data at input byte 2`)},
		{name: "v1-padded", path: tracesPath, fields: []hpack.HeaderField{bin("x-trace-bin", "YQ=x")}, send: v1Msg,
			want: malformed(`"YQ=x" in header "x-trace-bin": illegal base64 data at input byte 2`)},
		{name: "v1-one-symbol", path: tracesPath, fields: []hpack.HeaderField{bin("grpc-status-details-bin", "Y")}, send: v1Msg,
			want: malformed(`"Y" in header "grpc-status-details-bin": illegal base64 data at input byte 0`)},
		{name: "v1-headers-end", path: tracesPath, fields: []hpack.HeaderField{bin("x-trace-bin", "a b c d")},
			want: callEnd{httpStatus: "400", st: status.New(codes.Internal, `malformed binary metadata "a b c d" in header "x-trace-bin": illegal base64 data at input byte 1`), reset: noReset}},
		// grpc-message carries the quoted value percent-encoded.
		{name: "v1-not-ascii", path: tracesPath, fields: []hpack.HeaderField{bin("x-trace-bin", "ü")}, send: v1Msg,
			want: malformed(`"%C3%BC" in header "x-trace-bin": illegal base64 data at input byte 0`)},
		{name: "v1-sensitive-twice", path: tracesPath, fields: []hpack.HeaderField{{Name: "x-trace-bin", Value: "YWJjZA=", Sensitive: true}}, send: v1Msg, twice: true,
			want: malformed(`"YWJjZA=" in header "x-trace-bin": illegal base64 data at input byte 6`)},
		{name: "otep-unary", path: otepUnaryTracesPath, fields: []hpack.HeaderField{bin("grpc-trace-bin", "AAAAAAAAAAAAAAAAAAAAAAAAAAAA=")}, send: otepMsg,
			want: malformed(`"AAAAAAAAAAAAAAAAAAAAAAAAAAAA=" in header "grpc-trace-bin": illegal base64 data at input byte 28`)},
		{name: "otep-unary-twice", path: otepUnaryTracesPath, fields: []hpack.HeaderField{bin("x-a-bin", "YQ"), bin("x-b-bin", "Y===")}, send: otepMsg, twice: true,
			want: malformed(`"Y===" in header "x-b-bin": illegal base64 data at input byte 1`)},
		{name: "otep-stream", path: streamTracesPath, fields: []hpack.HeaderField{bin("x-trace-bin", "YQ==YQ==")}, send: otepMsg, twice: true,
			want: malformed(`"YQ==YQ==" in header "x-trace-bin": illegal base64 data at input byte 4`)},
		// The last malformed field gives the words.
		{name: "last-of-two", path: tracesPath, fields: []hpack.HeaderField{bin("x-a-bin", "!"), bin("x-b-bin", "YQ="), bin("x-c-bin", "YQ")}, send: v1Msg,
			want: malformed(`"YQ=" in header "x-b-bin": illegal base64 data at input byte 2`)},
		{name: "timeout-last", path: tracesPath, fields: []hpack.HeaderField{bin("x-a-bin", "!"), bin("grpc-timeout", "1x")}, send: v1Msg,
			want: callEnd{httpStatus: "400", st: status.New(codes.Internal, `malformed grpc-timeout: transport: timeout unit is not recognized: "1x"`), reset: http2.ErrCodeNo}},
		{name: "binary-last", path: tracesPath, fields: []hpack.HeaderField{bin("grpc-timeout", "1x"), bin("x-a-bin", "!")}, send: v1Msg,
			want: malformed(`"!" in header "x-a-bin": illegal base64 data at input byte 0`)},
		// Valid values, padded, unpadded and empty, are served; a name that only contains
		// -bin is not binary.
		{name: "v1-valid", path: tracesPath, send: v1Msg, twice: true, fields: []hpack.HeaderField{bin("x-a-bin", "YWI="),
			bin("x-b-bin", "YWI"), bin("x-c-bin", ""), bin("x-d-bin", "YWJj"), bin("x-bin-e", "!"), bin("grpc-timeout", "1M")}, want: served},
		{name: "otep-valid", path: otepUnaryTracesPath, send: otepMsg, fields: []hpack.HeaderField{bin("grpc-trace-bin", "AABhYmNkZWZnaGlqa2xtbm9w")},
			want: callEnd{httpStatus: "200", data: grpcMessage(otepOK), st: status.New(codes.OK, ""), reset: noReset}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, delivered, _ := perTransport(t, 1+btoi(tc.twice), next, served, func(i int, tr string, c *h2Client, enc *hpack.Encoder, buf *bytes.Buffer, id uint32) (callEnd, bool) {
				c.openCallIndexed(t, enc, buf, id, tc.path, len(tc.send) == 0, tc.fields...)
				if len(tc.send) > 0 {
					if err := c.fr.WriteData(id, true, tc.send); err != nil {
						t.Fatal(err)
					}
				}
				// A refusal resets the client's side when it was open at the headers.
				return c.readCallEnd(t, id, len(tc.send) > 0 && tc.want.httpStatus == "400"), true
			})
			for i, tr := range transports {
				for n, g := range got[i] {
					if g.String() != tc.want.String() {
						t.Errorf("%s, call %d: %v\nwant %v", tr, n+1, g, tc.want)
					}
				}
			}
			var want []byte
			if tc.want.httpStatus == "200" {
				for range 1 + btoi(tc.twice) {
					want = append(want, body...)
				}
			}
			want = append(want, next...)
			for i, tr := range transports {
				if !bytes.Equal(delivered[i], want) {
					t.Errorf("%s: the destination got %d bytes, want %d", tr, len(delivered[i]), len(want))
				}
			}
		})
	}
}

// perTransport sends calls calls, one after the other on one connection, to a fresh server of
// each transport: call sends the one with stream id id and returns how it ended, or false when
// it ended the connection (then nothing more is sent on it). On a connection that serves on, a
// last call, of the message next, must be served as served says. It returns, by transport, how
// each call ended, the bytes the destination got, and whether the connection ended.
func perTransport(t *testing.T, calls int, next []byte, served callEnd, call func(i int, tr string, c *h2Client, enc *hpack.Encoder, buf *bytes.Buffer, id uint32) (callEnd, bool)) (got [2][]callEnd, delivered [2][]byte, connEnded [2]bool) {
	t.Helper()
	for i, tr := range transports {
		rec := testkit.NewRecorder("recorder")
		e := start(t, testPipelineConfig(), configFor(tr), rec)
		c := dialH2Client(t, e.srv.Addr().String())
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		id := uint32(1)
		for range calls {
			end, open := call(i, tr, c, enc, &buf, id)
			if !open {
				connEnded[i] = true
				break
			}
			got[i] = append(got[i], end)
			id += 2
		}
		if !connEnded[i] {
			// The connection serves on: the next call is answered.
			c.call(t, id, grpcMessage(next), true)
			if a := c.readCallEnd(t, id, false); a.String() != served.String() {
				t.Fatalf("%s: the call after: %v; want %v", tr, a, served)
			}
		}
		e.p.Flush()
		for _, r := range rec.Received() {
			delivered[i] = append(delivered[i], r.Body...)
		}
	}
	return got, delivered, connEnded
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
