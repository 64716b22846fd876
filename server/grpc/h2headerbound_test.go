package grpcserver

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/otlpgate/otlpgate/internal/h2"
)

// A tenant header sent as plain text (not Huffman-coded: '~' takes 13 bits in Huffman) that
// brings the header list to -grpc.max-header-bytes exactly, one byte past it, and alone past
// it: both transports end each call alike, seen from a bare HTTP/2 client (grpc-go's client
// would refuse to send a list past the server's SETTINGS_MAX_HEADER_LIST_SIZE). grpc-go is the
// oracle; the own transport's decoder keeps a tenant header's value, so a value cut at the
// bound and accepted would show here as a call answered instead of a reset. One difference is
// chosen: a single value longer than the whole bound ends the connection on grpc-go (x/net's
// decoder refuses such a string as a compression error), while the own transport resets that
// stream alone and serves the next call on the same connection.
func TestTransportsHeaderListBoundAlike(t *testing.T) {
	const bound = 1 << 12
	base := []h2.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: tracesPath}, {Name: ":authority", Value: "otlpgate"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}
	size := 0 // RFC 7541 §4.1: name, value and 32 octets a field
	for _, f := range base {
		size += len(f.Name) + len(f.Value) + 32
	}
	const tenantHeader = "x-scope-orgid"
	// block is the call's header block with a tenant value that brings the list to n octets.
	block := func(n int) []byte {
		v := strings.Repeat("~", n-size-len(tenantHeader)-32)
		b := h2.AppendHeaderBlock(nil, append(base, h2.HeaderField{Name: tenantHeader, Value: v})...)
		if !strings.Contains(string(b), v) {
			t.Fatal("the tenant value was Huffman-coded")
		}
		return b
	}
	msg := grpcMessage(traceBody(t, 1, 1))
	calls := []struct {
		name string
		list int // the header list's size
	}{
		{"at the bound", bound},
		{"one past", bound + 1},
		{"small", size + len(tenantHeader) + 32 + 4},
		{"the value alone past", 2 * bound},
		{"small after", size + len(tenantHeader) + 32 + 4},
	}
	var got [2][]string
	for i, tr := range transports {
		sc := DefaultConfig()
		sc.Transport, sc.MaxHeaderBytes = tr, bound
		pc := testPipelineConfig()
		withTenants(nil)(t, &pc, &sc)
		e := start(t, pc, sc, nil)
		c := dialH2Client(t, e.srv.Addr().String())
		id := uint32(1)
		for _, call := range calls {
			// Each call on a connection of its own, once one ended, so that one outcome
			// (a connection closed) does not decide the next.
			if id > 1 && got[i][len(got[i])-1] == "connection closed" {
				c = dialH2Client(t, e.srv.Addr().String())
				id = 1
			}
			got[i] = append(got[i], sendBlock(t, c, id, block(call.list), msg))
			id += 2
		}
	}
	const alone = 3 // the value alone past: the chosen difference
	if got[0][alone] != "connection closed" || got[1][alone] != "rst FRAME_SIZE_ERROR" {
		t.Errorf("a value alone past the bound: grpc-go %s, otlpgate %s; want the connection closed, the stream reset",
			got[0][alone], got[1][alone])
	}
	for j, call := range calls {
		t.Logf("%s (%d octets): grpc-go %s, otlpgate %s", call.name, call.list, got[0][j], got[1][j])
		if j != alone && got[0][j] != got[1][j] {
			t.Errorf("%s (%d octets): grpc-go %s, otlpgate %s", call.name, call.list, got[0][j], got[1][j])
		}
	}
	// What grpc-go does, so that the comparison above compares something: the list at the
	// bound is read, one octet past is reset, and the connection serves the next call.
	if got[0][1] != "rst FRAME_SIZE_ERROR" || got[0][2] != "grpc-status 0" || !strings.HasPrefix(got[0][0], "grpc-status ") {
		t.Errorf("grpc-go ended the calls %q", got[0])
	}
}

// sendBlock opens stream id with block (split into CONTINUATION frames as the frame size
// requires) and msg, and returns how the stream ended: "grpc-status N", "rst CODE", or
// "connection closed".
func sendBlock(t *testing.T, c *h2Client, id uint32, block, msg []byte) string {
	t.Helper()
	first := true
	for len(block) > 0 || first {
		n := min(len(block), h2.DefaultMaxFrameSize)
		var err error
		if first {
			err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:n], EndHeaders: n == len(block)})
		} else {
			err = c.fr.WriteContinuation(id, n == len(block), block[:n])
		}
		if err != nil {
			return "connection closed"
		}
		block, first = block[n:], false
	}
	if err := c.fr.WriteData(id, true, msg); err != nil {
		return "connection closed"
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || isClosed(err) {
				return "connection closed"
			}
			t.Fatalf("read: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "rst " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo {
				return "connection closed" // what follows is the end of the connection
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == id && f.StreamEnded() {
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" {
						return "grpc-status " + hf.Value
					}
				}
				return fmt.Sprintf("trailers without grpc-status: %v", f.Fields)
			}
		}
	}
}

// isClosed reports whether err is the end of a connection the server closed.
func isClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "use of closed") || strings.Contains(s, "broken pipe")
}
