package grpcserver

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func gzipped(t testing.TB, b []byte) []byte { return ziptest.Gzip(t, b) }

// zstdFramed is b as one zstd frame behind an empty skippable frame: this package's zstd
// writer, which the test client compresses with, sends such a message as it is, so the bytes
// the server receives are known.
func zstdFramed(t testing.TB, b []byte) []byte { return ziptest.Zstd(t, pipeline.ZstdPreamble[:], b) }

// lazyPipelineConfig keeps batches open until the test flushes (no eager seal).
func lazyPipelineConfig() pipeline.Config {
	c := testPipelineConfig()
	c.Eager = false
	return c
}

const exportTraces = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// TestIntakePassThrough: v1 requests that arrive compressed in the server's pass-through
// encoding join one batch as the bytes they arrived as, still scanned (the items count), when
// the destination sends that encoding; the same requests go plain when the server keeps no
// compressed bytes (-grpc.passthrough-encoding=none), in another encoding, uncompressed, or
// when a request has malformed entries (salvaged: its admitted bytes are not the ones
// received). An OTEP request in the pass-through encoding is decoded from its plain form.
func TestIntakePassThrough(t *testing.T) {
	for _, c := range []struct {
		enc      pipeline.Encoding
		name     string
		other    string
		compress func(testing.TB, []byte) []byte
	}{{pipeline.EncodingGzip, codec.Gzip, codec.Zstd, gzipped}, {pipeline.EncodingZstd, codec.Zstd, codec.Gzip, zstdFramed}} {
		t.Run(c.name, func(t *testing.T) {
			rec := &testkit.Recorder{}
			d := &testkit.WireDest{Recorder: rec, Enc: c.enc}
			sc := DefaultConfig()
			sc.PassThrough = c.name
			e := startWith(t, lazyPipelineConfig(), sc, rec, d)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g := otlpgen.New(5)
			var want []byte
			var plains [][]byte
			for range 3 {
				body, _ := g.Spans(otlpgen.Shape{Spans: 4, Attrs: 3}).MarshalVT()
				wire := c.compress(t, body)
				want = append(want, wire...)
				plains = append(plains, body)
				var r rawBytes = wire
				if err := e.raw.Invoke(ctx, exportTraces, r.raw(), &coltracev1.ExportTraceServiceResponse{}, grpc.UseCompressor(c.name)); err != nil {
					t.Fatal(err)
				}
			}
			if c.enc == pipeline.EncodingZstd {
				want = append(pipeline.ZstdPreamble[:], want...)
			}
			e.p.Flush()
			got := rec.Received()
			if len(got) != 1 || d.Encodings()[0] != c.enc || got[0].Items != 12 || !bytes.Equal(got[0].Body, want) {
				t.Fatalf("%d batches (%v, %d items); want one %s batch of the 3 requests as received, 12 spans", len(got), d.Encodings(), got[0].Items, c.name)
			}

			// The other encoding, and no compression, go plain: the batch is the plain bodies.
			body, _ := g.Spans(otlpgen.Shape{Spans: 2, Attrs: 1}).MarshalVT()
			var r rawBytes = body
			if err := e.raw.Invoke(ctx, exportTraces, r.raw(), &coltracev1.ExportTraceServiceResponse{}, grpc.UseCompressor(c.other)); err != nil {
				t.Fatal(err)
			}
			if err := e.raw.Invoke(ctx, exportTraces, r.raw(), &coltracev1.ExportTraceServiceResponse{}); err != nil {
				t.Fatal(err)
			}
			e.p.Flush()
			got = rec.Received()
			if len(got) != 2 || d.Encodings()[1] != pipeline.EncodingNone || !bytes.Equal(got[1].Body, append(append([]byte(nil), body...), body...)) {
				t.Fatalf("requests in %s and uncompressed went %v, want one plain batch of both", c.other, d.Encodings())
			}

			// A request with a malformed entry keeps its good one, decompressed.
			bad := append(append([]byte(nil), body...), 0x0a, 0x02, 0xff, 0xff) // an entry that is no ResourceSpans
			r = c.compress(t, bad)
			resp := &coltracev1.ExportTraceServiceResponse{}
			if err := e.raw.Invoke(ctx, exportTraces, r.raw(), resp, grpc.UseCompressor(c.name)); err != nil || resp.GetPartialSuccess().GetErrorMessage() == "" {
				t.Fatalf("partial request: %v, %v", resp, err)
			}
			e.p.Flush()
			got = rec.Received()
			if len(got) != 3 || d.Encodings()[2] != pipeline.EncodingNone || !bytes.Equal(got[2].Body, body) {
				t.Fatalf("the salvaged request went %v, want plain with its good entry", d.Encodings())
			}

			// An OTEP unary request in the pass-through encoding is decoded from its plain form.
			o := otepReq(t, 9, plains[0])
			var or rawBytes = o
			if c.enc == pipeline.EncodingGzip {
				or = gzipped(t, o)
			}
			oresp := &otepv1.ExportResponse{}
			if err := e.raw.Invoke(ctx, "/otlpgate.otep.v1.UnaryExporter/ExportTraces", or.raw(), oresp, grpc.UseCompressor(c.name)); err != nil || oresp.Id != 9 || oresp.ResultCode != otepv1.ResultCode_Success {
				t.Fatalf("OTEP unary: %v, %v", oresp, err)
			}
			e.p.Flush()
			if got = rec.Received(); len(got) != 4 || !bytes.Equal(got[3].Body, plains[0]) {
				t.Fatalf("OTEP request: %d batches, want its plain request as the fourth", len(got))
			}
		})
	}
}

// TestIntakePassThroughOff: with no pass-through encoding the server keeps nothing: the same
// gzip requests join a plain batch.
func TestIntakePassThroughOff(t *testing.T) {
	rec := &testkit.Recorder{}
	d := &testkit.WireDest{Recorder: rec, Enc: pipeline.EncodingGzip}
	sc := DefaultConfig()
	sc.PassThrough = ""
	e := startWith(t, lazyPipelineConfig(), sc, rec, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, _ := otlpgen.New(2).Spans(otlpgen.Shape{Spans: 3, Attrs: 2}).MarshalVT()
	var r rawBytes = gzipped(t, body)
	if err := e.raw.Invoke(ctx, exportTraces, r.raw(), &coltracev1.ExportTraceServiceResponse{}, grpc.UseCompressor(codec.Gzip)); err != nil {
		t.Fatal(err)
	}
	e.p.Flush()
	if got := rec.Received(); len(got) != 1 || d.Encodings()[0] != pipeline.EncodingNone || !bytes.Equal(got[0].Body, body) {
		t.Fatalf("%d batches (%v), want one plain batch of the request", len(got), d.Encodings())
	}
}

// A compressed message that inflates past -grpc.max-recv-msg-size is refused with
// RESOURCE_EXHAUSTED, as gRPC refuses one it inflates itself, and nothing is admitted; a
// message just within the limit is admitted whole.
func TestIntakePassThroughSizeLimit(t *testing.T) {
	rec := &testkit.Recorder{}
	d := &testkit.WireDest{Recorder: rec, Enc: pipeline.EncodingGzip}
	sc := DefaultConfig()
	sc.MaxRecvMsgSize = 1 << 20
	e := startWith(t, lazyPipelineConfig(), sc, rec, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	over := inflatingTraces(t, 1<<20)
	var r rawBytes = gzipped(t, over)
	err := e.raw.Invoke(ctx, exportTraces, r.raw(), &coltracev1.ExportTraceServiceResponse{}, grpc.UseCompressor(codec.Gzip))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "decompression") {
		t.Fatalf("a message inflating past the limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	within := inflatingTraces(t, 1<<20-200)
	if len(within) > 1<<20 {
		t.Fatalf("test request of %d bytes is over the limit", len(within))
	}
	r = gzipped(t, within)
	if err := e.raw.Invoke(ctx, exportTraces, r.raw(), &coltracev1.ExportTraceServiceResponse{}, grpc.UseCompressor(codec.Gzip)); err != nil {
		t.Fatalf("a message within the limit: %v", err)
	}
	e.p.Flush()
	if got := rec.Received(); len(got) != 1 || d.Encodings()[0] != pipeline.EncodingGzip || !bytes.Equal(got[0].Body, r) {
		t.Fatalf("%d batches (%v), want the one within the limit, as received", len(got), d.Encodings())
	}
}
