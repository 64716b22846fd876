//go:build !race

package grpcserver

import (
	"bytes"
	"testing"

	"github.com/otlpgate/otlpgate/internal/h2"
)

// A unary v1 call on otlpgate's own transport costs no allocation on the server once warm:
// its frames are read into the connection's pooled buffer and parsed in place, its header
// block decoded by the connection's decoder, its message collected into a pooled buffer that
// admission may adopt, the call admitted on the reader and answered from frames built once,
// in one write. The race detector makes sync.Pool drop items, hence the build tag.
func TestH2UnaryZeroAlloc(t *testing.T) {
	h := newH2Harness(t, traceBody(t, 1, 50))
	for range 20 {
		h.call() // warm the pools and the stream free list
	}
	callsZeroAlloc(t, h, 500)
	h.p.Flush()
	if items := h.sink.Items(); items != 50*(20+501) {
		t.Fatalf("destination got %d spans, want %d", items, 50*521)
	}
}

// A unary call with a grpc-timeout (OTel SDKs send one with every call) that comes whole in
// one read is answered in it: its deadline needs no timer, and none is made or armed (a timer
// armed and stopped per call costs more than the rest of its bookkeeping); the call costs no
// allocation either.
func TestH2UnaryDeadlineNoTimer(t *testing.T) {
	h := newH2Harness(t, traceBody(t, 1, 50), h2.HeaderField{Name: "grpc-timeout", Value: "10S"})
	for range 20 {
		h.call()
	}
	allocs := testing.AllocsPerRun(200, func() { h.call() })
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if len(h.c.mu.free) == 0 {
		t.Fatal("no stream recycled")
	}
	for _, st := range h.c.mu.free {
		if st.deadlineTimer != nil || st.deadlineArmed {
			t.Fatal("a timer was made for a call answered in the read its headers came in")
		}
	}
}

// A call whose metadata carries binary fields (OpenCensus's grpc-trace-bin, padded and not)
// has each checked as grpc-go decodes it, and costs no allocation either.
func TestH2UnaryBinaryMetadataZeroAlloc(t *testing.T) {
	h := newH2Harness(t, traceBody(t, 1, 50), h2.HeaderField{Name: "grpc-trace-bin", Value: "AABhYmNkZWZnaGlqa2xtbm9wAWFiY2RlZmdoAgE"},
		h2.HeaderField{Name: "x-b-bin", Value: "YWJjZA=="})
	for range 20 {
		h.call()
	}
	callsZeroAlloc(t, h, 200)
}

// callsZeroAlloc makes runs calls (after AllocsPerRun's warm-up one) and fails unless each is
// answered OK (the answer, and a WINDOW_UPDATE of the connection's when a quarter of it was
// used) and none allocates.
func callsZeroAlloc(t *testing.T, h *h2Harness, runs int) {
	t.Helper()
	bad := 0
	want := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(runs, func() {
		want = appendOKAnswer(want[:0], h.next)
		if got := h.call(); !bytes.HasPrefix(got, want) {
			bad++
		}
	})
	if bad > 0 {
		t.Fatalf("%d calls not answered with grpc-status 0", bad)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}
