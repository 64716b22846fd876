package grpcserver

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// openFields opens stream id with exactly fields, encoded by enc (a field sent before is
// named from the server's dynamic table), the block split into a HEADERS frame and
// CONTINUATIONs at the offsets split gives (a negative one counts from the block's end).
func (c *h2Client) openFields(t *testing.T, enc *hpack.Encoder, buf *bytes.Buffer, id uint32, end bool, split []int, fields []hpack.HeaderField) {
	t.Helper()
	buf.Reset()
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	block := buf.Bytes()
	frags := [][]byte{}
	prev := 0
	for _, at := range split {
		if at < 0 {
			at += len(block)
		}
		at = min(at, len(block))
		frags, prev = append(frags, block[prev:at]), at
	}
	frags = append(frags, block[prev:])
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frags[0], EndHeaders: len(frags) == 1, EndStream: end}); err != nil {
		t.Fatal(err)
	}
	for i, f := range frags[1:] {
		if err := c.fr.WriteContinuation(id, i == len(frags)-2, f); err != nil {
			t.Fatal(err)
		}
	}
}

// readConnEnd reads the connection's frames until it is closed, and returns the GOAWAY
// frames it saw; a frame of stream id fails the test.
func (c *h2Client) readConnEnd(t *testing.T, id uint32) []string {
	t.Helper()
	var goaways []string
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return goaways
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goaways = append(goaways, fmt.Sprintf("GOAWAY %v last %d", f.ErrCode, f.LastStreamID))
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		}
		if f.Header().StreamID == id {
			t.Fatalf("a frame of the stream: %v", f)
		}
	}
}

// A call's header fields are held to the rules grpc-go's server holds them to, with the same
// answers on both transports: what x/net's framer refuses as it reads the block (a name that
// is not a lower-case token, a value with a control character, a pseudo-field after a regular
// one, an unknown or repeated pseudo-field, a response's) resets the stream with
// PROTOCOL_ERROR, and ends the connection when a CONTINUATION follows the field; several host
// fields are refused with 400 and INTERNAL in grpc-go's words, before a connection field
// (reset) or a content-type that is not gRPC; a call with neither :authority nor host is
// refused with 400, one whose method is not POST with 405; spaces around a value and octets
// above 0x7f are served. Where grpc-go serves or answers what RFC 9113 calls malformed (te
// other than trailers, the connection-specific fields but connection, a missing or empty
// pseudo-field), the own transport resets the stream as the RFC asks (grpcGo says what
// grpc-go does). Each field is sent literally or Huffman-coded as x/net's encoder chooses, and
// named from the dynamic table on a second call; the next call on the connection is served,
// and the destination gets only what was served.
func TestRequestFieldRules(t *testing.T) {
	body := traceBody(t, 4, 3)
	next := traceBody(t, 5, 2)
	msg := grpcMessage(body)
	hf := func(name, value string) hpack.HeaderField { return hpack.HeaderField{Name: name, Value: value} }
	base := []hpack.HeaderField{hf(":method", "POST"), hf(":scheme", "http"), hf(":path", tracesPath), hf(":authority", "otlpgate"),
		hf("content-type", "application/grpc"), hf("te", "trailers"), hf("user-agent", "test")}
	with := func(extra ...hpack.HeaderField) []hpack.HeaderField {
		return append(append([]hpack.HeaderField(nil), base...), extra...)
	}
	// without is base without the fields named, with extra after.
	without := func(names []string, extra ...hpack.HeaderField) []hpack.HeaderField {
		var out []hpack.HeaderField
	next:
		for _, f := range base {
			for _, n := range names {
				if f.Name == n {
					continue next
				}
			}
			out = append(out, f)
		}
		return append(out, extra...)
	}
	reset := callEnd{reset: http2.ErrCodeProtocol}
	served := callEnd{httpStatus: "200", data: grpcMessage(nil), st: status.New(codes.OK, ""), reset: noReset}
	refused := func(httpStatus string, code codes.Code, msg string) callEnd {
		return callEnd{httpStatus: httpStatus, st: status.New(code, msg), reset: http2.ErrCodeNo}
	}
	long := "0123456789abcdefghijklmnopqrstuvwxyz0123456789" // Huffman-coded by x/net's encoder
	var xb bytes.Buffer
	hpack.NewEncoder(&xb).WriteField(hf("x-b", long)) // its length as the block's last field, sent once
	for _, tc := range []struct {
		name   string
		fields []hpack.HeaderField
		twice  bool  // the call is made again on the connection, its fields named from the table
		end    bool  // the headers end the call: no message is sent
		split  []int // the block's CONTINUATION offsets
		want   callEnd
		// grpcGo, when set, is grpc-go's answer where it lets through what RFC 9113 calls
		// malformed and the own transport resets the stream as the RFC asks (want).
		grpcGo *callEnd
		// connEnds: the connection ends instead of answering (own: after a GOAWAY with this
		// code; grpc-go closes it without one).
		connEnds bool
	}{
		{name: "upper-case-name", fields: with(hf("X-Tenant", "a")), want: reset},
		{name: "space-in-name", fields: with(hf("x tenant", "a")), twice: true, want: reset},
		{name: "empty-name", fields: with(hf("", "a")), want: reset},
		{name: "not-ascii-name", fields: with(hf("x-\xc3\xa9", "a")), want: reset},
		{name: "nul-in-value", fields: with(hf("x-a", "a\x00b")), twice: true, want: reset},
		{name: "cr-in-value", fields: with(hf("x-a", "a\rb")), want: reset},
		{name: "lf-in-value-huffman", fields: with(hf("x-a", long+"\n")), twice: true, want: reset},
		{name: "del-in-value", fields: with(hf("x-a", "\x7f")), want: reset},
		{name: "lf-in-binary", fields: with(hf("x-a-bin", "YQ\n==")), want: reset},
		{name: "ctl-in-authority", fields: without([]string{":authority", "content-type", "te", "user-agent"}, hf(":authority", "a\x01"), hf("content-type", "application/grpc")), want: reset},
		{name: "tab-space-high", fields: with(hf("x-a", "\t a\xc3\xa9\xff "), hf("x-b", "")), twice: true, want: served},
		{name: "token-name", fields: with(hf("!#$%&'*+-.^_`|~09az", long)), want: served},
		{name: "pseudo-after-regular", fields: without([]string{":authority"}, hf(":authority", "otlpgate")), want: reset},
		{name: "unknown-pseudo", fields: append([]hpack.HeaderField{hf(":foo", "a")}, base...), want: reset},
		{name: "upper-case-pseudo", fields: append([]hpack.HeaderField{hf(":Path", tracesPath)}, without([]string{":path"})...), want: reset},
		{name: "status", fields: append([]hpack.HeaderField{hf(":status", "200")}, base...), want: reset},
		{name: "two-paths", fields: append([]hpack.HeaderField{hf(":path", tracesPath)}, base...), want: reset},
		{name: "two-authorities", fields: append([]hpack.HeaderField{hf(":authority", "otlpgate")}, base...), twice: true, want: reset},
		{name: "connection", fields: with(hf("connection", "close")), want: reset},
		{name: "keep-alive", fields: with(hf("keep-alive", "timeout=5")), want: reset, grpcGo: &served},
		{name: "proxy-connection", fields: with(hf("proxy-connection", "close")), want: reset, grpcGo: &served},
		{name: "transfer-encoding", fields: with(hf("transfer-encoding", "chunked")), want: reset, grpcGo: &served},
		{name: "upgrade", fields: with(hf("upgrade", "h2c")), want: reset, grpcGo: &served},
		{name: "te-gzip", fields: without([]string{"te"}, hf("te", "gzip")), want: reset, grpcGo: &served},
		{name: "no-te", fields: without([]string{"te"}), want: served},
		{name: "no-scheme", fields: without([]string{":scheme"}), want: reset, grpcGo: &served},
		{name: "host", fields: without([]string{":authority"}, hf("host", "otlpgate")), twice: true, want: served},
		{name: "host-and-authority", fields: with(hf("host", "other")), want: served},
		{name: "two-hosts", fields: with(hf("host", "a"), hf("host", "b")), twice: true,
			want: refused("400", codes.Internal, "num values of :authority: 1, num values of host: 2, both must only have 1 value as per HTTP/2 spec")},
		{name: "two-hosts-no-authority", fields: without([]string{":authority"}, hf("host", "a"), hf("host", "a")),
			want: refused("400", codes.Internal, "num values of :authority: 0, num values of host: 2, both must only have 1 value as per HTTP/2 spec")},
		{name: "two-hosts-connection", fields: with(hf("connection", "close"), hf("host", "a"), hf("host", "b")),
			want: refused("400", codes.Internal, "num values of :authority: 1, num values of host: 2, both must only have 1 value as per HTTP/2 spec")},
		{name: "no-authority", fields: without([]string{":authority"}), twice: true,
			want: refused("400", codes.Internal, "no host or :authority header present")},
		{name: "get", fields: append([]hpack.HeaderField{hf(":method", "GET")}, without([]string{":method"})...),
			want: refused("405", codes.Internal, `Received a HEADERS frame with :method "GET" which should be POST`)},
		{name: "no-method", fields: without([]string{":method"}), want: reset,
			grpcGo: &callEnd{httpStatus: "405", st: status.New(codes.Internal, `Received a HEADERS frame with :method "" which should be POST`), reset: http2.ErrCodeNo}},
		{name: "no-path", fields: without([]string{":path"}), end: true, want: reset,
			grpcGo: &callEnd{httpStatus: "200", st: status.New(codes.Unimplemented, `malformed method name: ""`), reset: noReset}},
		{name: "empty-path", fields: append([]hpack.HeaderField{hf(":path", "")}, without([]string{":path"})...), end: true, want: reset,
			grpcGo: &callEnd{httpStatus: "200", st: status.New(codes.Unimplemented, `malformed method name: ""`), reset: noReset}},
		{name: "path-without-slash", fields: append([]hpack.HeaderField{hf(":path", "x.Service/Export")}, without([]string{":path"})...), end: true,
			want: callEnd{httpStatus: "200", st: status.New(codes.Unimplemented, `malformed method name: "x.Service/Export"`), reset: noReset}},
		// The field in a HEADERS frame that a CONTINUATION follows ends the connection; in
		// the last CONTINUATION, only the stream.
		{name: "continued", fields: with(hf("x-a", "a\x00b"), hf("x-b", long)), split: []int{-20}, connEnds: true},
		{name: "continued-at-its-end", fields: with(hf("x-a", "a\x00b"), hf("x-b", long)), split: []int{10, -xb.Len()}, connEnds: true},
		{name: "continued-at-its-start", fields: with(hf("x-b", long), hf("x-a", "a\x00b")), split: []int{10, -9}, want: reset},
		{name: "continued-in-last", fields: with(hf("x-b", long), hf("x-a", "a\x00b")), split: []int{10, -5}, want: reset},
		{name: "continued-valid", fields: with(hf("x-b", long)), split: []int{10, 20}, twice: true, want: served},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := [2]callEnd{tc.want, tc.want}
			if tc.grpcGo != nil {
				want[0] = *tc.grpcGo
			}
			got, delivered, _ := perTransport(t, 1+btoi(tc.twice), next, served, func(i int, tr string, c *h2Client, enc *hpack.Encoder, buf *bytes.Buffer, id uint32) (callEnd, bool) {
				c.openFields(t, enc, buf, id, tc.end, tc.split, tc.fields)
				if tc.connEnds {
					goaways := c.readConnEnd(t, id)
					if want := map[string]string{TransportGRPCGo: "[]", TransportOwn: "[GOAWAY PROTOCOL_ERROR last 0]"}[tr]; fmt.Sprint(goaways) != want {
						t.Fatalf("%s: the connection ended with %v, want %s", tr, goaways, want)
					}
					return callEnd{}, false
				}
				if !tc.end {
					if err := c.fr.WriteData(id, true, msg); err != nil {
						t.Fatal(err)
					}
				}
				// A refusal with trailers resets the client's side, open at the headers.
				return c.readCallEnd(t, id, !tc.end && want[i].st != nil && want[i].reset != noReset), true
			})
			for i, tr := range transports {
				for n, g := range got[i] {
					if g.String() != want[i].String() {
						t.Errorf("%s, call %d: %v\nwant %v", tr, n+1, g, want[i])
					}
				}
				var wantBytes []byte
				if want[i].st != nil && want[i].st.Code() == codes.OK {
					for range 1 + btoi(tc.twice) {
						wantBytes = append(wantBytes, body...)
					}
				}
				if !tc.connEnds {
					wantBytes = append(wantBytes, next...)
				}
				if !bytes.Equal(delivered[i], wantBytes) {
					t.Errorf("%s: the destination got %d bytes, want %d", tr, len(delivered[i]), len(wantBytes))
				}
			}
		})
	}
}
