//go:build !race

package grpcserver

import (
	"bytes"
	"testing"
)

// A message of an OTEP stream on otlpgate's own transport costs no allocation on the server
// once warm: read into the connection's pooled buffer, taken into a pooled message buffer
// under its intake reservation, scanned and admitted on the reader, answered into the
// stream's parked bytes and written with the read's other frames. The race detector makes
// sync.Pool drop items, hence the build tag.
func TestH2StreamMessageZeroAlloc(t *testing.T) {
	h := newH2StreamHarness(t, traceBody(t, 1, 50))
	for range 20 {
		h.send() // warm the pools; the first answer carries the response headers
	}
	bad := 0
	allocs := testing.AllocsPerRun(500, func() {
		// The answer, and WINDOW_UPDATEs of the stream's and the connection's when a quarter
		// of each was used.
		if got := h.send(); !bytes.HasPrefix(got, h.answer) {
			bad++
		}
	})
	if bad > 0 {
		t.Fatalf("%d messages not answered with their id and Success", bad)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per stream message", allocs)
	}
	h.p.Flush()
	if items := h.sink.Items(); items != 50*(20+501) {
		t.Fatalf("destination got %d spans, want %d", items, 50*521)
	}
}
