package grpcserver

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"

	"github.com/otlpgate/otlpgate/internal/h2"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// h2StreamHarness is an OTEP StreamExporter stream open on an h2Harness's connection: each
// message is sent as one read (its DATA frame, and the window its answer will take, given
// back to the server), and its answer awaited as the server's write.
type h2StreamHarness struct {
	*h2Harness
	id     uint32
	chunk  []byte // the message's DATA frame, then the WINDOW_UPDATEs
	answer []byte // the DATA frame of the message's answer
}

// streamID is the id of every message the harness sends: a fixed size, so that every answer
// takes the same window.
const streamID = 1 << 40

func newH2StreamHarness(tb testing.TB, body []byte) *h2StreamHarness {
	tb.Helper()
	h := &h2StreamHarness{h2Harness: newH2Harness(tb, body)}
	h.id = h.next
	h.next += 2
	block := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", h2StreamPaths[0], "", "bench")...)
	open := h2.AppendFrameHeader(nil, h2.FrameHeader{Length: uint32(len(block)), Type: http2.FrameHeaders, Flags: http2.FlagHeadersEndHeaders, StreamID: h.id})
	open = append(open, block...)
	h.mc.in <- open // no answer: nothing is written

	req := otepReq(tb, streamID, body)
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	h.chunk = appendDataFrame(nil, h.id, false, append(msg, req...))
	resp := &otepv1.ExportResponse{Id: streamID}
	rb, err := resp.MarshalVT()
	if err != nil {
		tb.Fatal(err)
	}
	payload := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(rb))), rb...)
	h.chunk = appendWindowUpdate(h.chunk, h.id, uint32(len(payload)))
	h.chunk = appendWindowUpdate(h.chunk, 0, uint32(len(payload)))
	h.answer = appendDataFrame(nil, h.id, false, payload)
	return h
}

// send sends one message and waits for the server's write; it returns the bytes written.
func (h *h2StreamHarness) send() []byte {
	h.mc.in <- h.chunk
	<-h.mc.wrote
	return h.mc.last
}

// BenchmarkH2StreamMessage is one message of 50 spans on an OTEP stream of otlpgate's own
// transport, on the server: read from the connection, taken in, admitted into the pipeline,
// answered and written (in memory: no socket).
func BenchmarkH2StreamMessage(b *testing.B) {
	body := traceBody(b, 1, 50)
	h := newH2StreamHarness(b, body)
	for range 10 {
		h.send() // the first write carries the answer's headers
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h.send()
	}
}
