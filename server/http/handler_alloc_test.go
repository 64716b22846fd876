//go:build !race

package httpserver

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
)

// A protobuf request through the handler into the pipeline allocates nothing in steady state,
// plain or compressed: fasthttp's request context is reused as on a keep-alive connection, the
// body is admitted from fasthttp's buffer (or the pooled inflated copy) and the answer is
// written without a body. The race detector makes sync.Pool drop items, hence the build tag.
// So does handing the client's address to the processing steps that write it into every
// resource (-resource.from-peer).
func TestHandlerAllocs(t *testing.T) {
	req := traces(t, 1, 50)
	fromPeer, err := process.New(process.Config{FromPeer: "client.address", FromPeerAction: process.PeerUpsert})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, coding string
		body         []byte
		proc         pipeline.Processor
	}{
		{"identity", "", req, nil},
		{"gzip", "gzip", gzipped(t, req), nil},
		{"zstd", "zstd", zstded(t, req), nil},
		{"identity, -resource.from-peer", "", req, fromPeer},
		{"gzip, -resource.from-peer", "gzip", gzipped(t, req), fromPeer},
	} {
		h := newProcessingHarness(t, tc.proc)
		ctx := h.ctx(tc.coding, tc.body)
		run := func() {
			h.srv.handle(ctx)
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("%s: status %d %q", tc.name, ctx.Response.StatusCode(), ctx.Response.Body())
			}
			ctx.Response.Reset()
		}
		for range 10 {
			run() // warm the pools
		}
		if got := testing.AllocsPerRun(500, run); got != 0 {
			t.Errorf("%s: %v allocs per request, want 0", tc.name, got)
		}
		h.p.Flush()
		if items := h.sink.Items(); items != 50*(10+501) {
			t.Errorf("%s: destination got %d items, want %d", tc.name, items, 50*511)
		}
	}
}
