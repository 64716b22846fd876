package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
)

// postGzip sends body gzip-compressed to the gateway's OTLP/HTTP intake and returns the status.
func postGzip(t *testing.T, g *Gateway, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+g.HTTPAddr().String()+"/v1/traces", bytes.NewReader(ziptest.Gzip(t, body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// With a spool, a -dest.file reload tells admission what the destinations now send: gzip
// requests are spooled as they arrived while the destination sends gzip, and plain once it
// sends zstd. The records spooled compressed before the reload, which the upstream had not
// taken, reach it through the replacement, which inflates them; every span arrives once.
func TestDestFileSpoolCompressedReload(t *testing.T) {
	a := startUpstream(t)
	a.hold()
	path, cfg := spoolDestFileConfig(t)
	writeFile(t, path, destSpec("a", a.addr, "compression=gzip"))
	g := startGateway(t, cfg)
	send := func(from, to uint64) {
		t.Helper()
		for id := from; id < to; id++ {
			if code := postGzip(t, g, traceBody(t, 512, id)); code != 200 {
				t.Fatalf("POST span %d: %d", id, code)
			}
		}
	}
	counter := func(name string, labels ...string) float64 { return testkit.Counter(t, name, labels...) }
	compressed := counter("otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	fellBack := counter("otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "destinations")
	inflated := counter("otlpgate_spool_inflated_records_total")

	send(1, 31)
	if n := counter("otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - compressed; n != 30 {
		t.Fatalf("%v requests spooled compressed, want 30", n)
	}
	gaveUp := counterValue(t, "otlpgate_client_returned_to_spool_requests_total", "a")
	// The destination being replaced has calls held at the upstream, on its own connection.
	eventually(t, func() string { return "no call of the first destination reached the upstream" }, func() bool {
		return len(a.heldNow()) > 0
	})
	replaced := a.heldNow()
	writeFile(t, path, destSpec("a", a.addr, "compression=zstd"))
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	send(31, 61)
	if n := counter("otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "destinations") - fellBack; n != 30 {
		t.Fatalf("%v requests spooled plain for the zstd destination, want 30", n)
	}
	// The replaced destination gives up what it holds after -shutdown.timeout, and its
	// records stay in the spool for the replacement: returned, not dropped.
	dropped := counterValue(t, "otlpgate_client_dropped_requests_total", "a")
	eventually(t, func() string { return "the replaced destination never gave up" }, func() bool {
		return counterValue(t, "otlpgate_client_returned_to_spool_requests_total", "a") > gaveUp
	})
	// Giving up cancels its calls; the upstream sees that a moment later. Released before, a
	// call the replaced destination gave up on would be recorded as answered, and its spans
	// would arrive again from the replacement: the duplicate a replacement may cause, which
	// this test does not count on either way.
	eventually(t, func() string { return "the replaced destination's calls are still held at the upstream" }, func() bool {
		for _, addr := range replaced {
			if a.heldCalls(addr) > 0 {
				return false
			}
		}
		return true
	})
	a.release()
	eventually(t, func() string { return "not every span arrived" }, func() bool {
		for id := uint64(1); id < 61; id++ {
			if a.count(id) == 0 {
				return false
			}
		}
		return true
	})
	for id := uint64(1); id < 61; id++ {
		if n := a.count(id); n != 1 {
			t.Fatalf("span %d arrived %d times", id, n)
		}
	}
	if n := counterValue(t, "otlpgate_client_dropped_requests_total", "a") - dropped; n != 0 {
		t.Fatalf("%v requests dropped, want none: the replacement delivered them", n)
	}
	if n := counter("otlpgate_spool_inflated_records_total") - inflated; n != 30 {
		t.Fatalf("%v records inflated, want the 30 spooled compressed", n)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
