package httpserver

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// TestIntakePassThrough: protobuf requests that arrive compressed the way the destination
// sends join one batch as the bytes they arrived as (zstd behind its skippable frame), still
// scanned: the items count; a compressed JSON request and a compressed request of which some
// entries are malformed (salvaged: its admitted bytes are not the ones received) go plain.
func TestIntakePassThrough(t *testing.T) {
	for _, c := range []struct {
		enc      pipeline.Encoding
		name     string
		compress func(testing.TB, []byte) []byte
	}{{pipeline.EncodingGzip, "gzip", gzipped}, {pipeline.EncodingZstd, "zstd", zstded}} {
		t.Run(c.name, func(t *testing.T) {
			rec := &testkit.Recorder{}
			d := &testkit.WireDest{Recorder: rec, Enc: c.enc}
			e := startWith(t, testPipelineConfig(), DefaultConfig(), rec, d)
			g := otlpgen.New(3)
			var want []byte
			for range 3 {
				body, _ := g.Spans(otlpgen.Shape{Spans: 4, Attrs: 3}).MarshalVT()
				wire := c.compress(t, body)
				want = append(want, wire...)
				r := e.do(t, http.MethodPost, "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": c.name}, wire)
				if r.status != http.StatusOK {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
			}
			if c.enc == pipeline.EncodingZstd {
				want = append(pipeline.ZstdPreamble[:], want...)
			}
			e.p.Flush()
			got := rec.Received()
			if len(got) != 1 || d.Encodings()[0] != c.enc || got[0].Items != 12 || !bytes.Equal(got[0].Body, want) {
				t.Fatalf("%d batches (first %v, %d items); want one %s batch of the 3 requests as received, 12 spans", len(got), d.Encodings(), got[0].Items, c.name)
			}

			// A request with a malformed entry keeps its good one, decompressed.
			good, _ := g.Spans(otlpgen.Shape{Spans: 2, Attrs: 1}).MarshalVT()
			bad := append(append([]byte(nil), good...), 0x0a, 0x02, 0xff, 0xff) // an entry that is no ResourceSpans
			r := e.do(t, http.MethodPost, "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": c.name}, c.compress(t, bad))
			if r.status != http.StatusOK {
				t.Fatalf("partial request: status %d: %s", r.status, r.body)
			}
			e.p.Flush()
			got = rec.Received()
			if len(got) != 2 || d.Encodings()[1] != pipeline.EncodingNone || !bytes.Equal(got[1].Body, good) {
				t.Fatalf("the salvaged request went %v, want plain with its good entry", d.Encodings())
			}
		})
	}
}
