package fastpath_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/collector/config/configgrpc" // registers the Collector's gRPC zstd
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/encoding"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/strictsink"
)

var _ = configgrpc.ServerConfig{}

// wireRecorder is a destination that sends pass-through batches of enc, and keeps a copy of
// every batch it is handed.
type wireRecorder struct {
	enc pipeline.Encoding
	mu  sync.Mutex
	got []wireBatch
}

type wireBatch struct {
	enc          pipeline.Encoding
	items, plain int
	body         []byte
}

func (r *wireRecorder) Name() string                   { return "wire-" + r.enc.String() }
func (r *wireRecorder) PassThrough() pipeline.Encoding { return r.enc }
func (r *wireRecorder) Enqueue(b *pipeline.Batch) error {
	r.mu.Lock()
	r.got = append(r.got, wireBatch{b.Encoding, b.Items, b.PlainLen(), bytes.Clone(b.Payload.Bytes())})
	r.mu.Unlock()
	b.Done(true)
	return nil
}

func (r *wireRecorder) batches() []wireBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wireBatch(nil), r.got...)
}

// compressedRequests returns n trace requests of a few spans each, plain and compressed in
// enc as an SDK would send them (one gzip member or zstd frame each), with their span ids in
// order.
func compressedRequests(t testing.TB, n int, enc pipeline.Encoding) (plain, wire [][]byte, ids []string) {
	t.Helper()
	g := otlpgen.New(7)
	zw, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	for i := range n {
		body, err := g.Spans(otlpgen.Shape{Spans: 3 + i, Attrs: 4}).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, body)
		ids = append(ids, spanIDs(t, body)...)
		switch enc {
		case pipeline.EncodingGzip:
			var b bytes.Buffer
			gw := gzip.NewWriter(&b)
			gw.Write(body)
			gw.Close()
			wire = append(wire, b.Bytes())
		case pipeline.EncodingZstd:
			wire = append(wire, zw.EncodeAll(body, nil))
		}
	}
	return plain, wire, ids
}

// spanIDs decodes a v1 trace request with the Collector's pdata and lists its span ids.
func spanIDs(t testing.TB, body []byte) []string {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		t.Fatalf("pdata cannot decode the request: %v", err)
	}
	var ids []string
	rss := req.Traces().ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				s := spans.At(k)
				ids = append(ids, s.TraceID().String()+"/"+s.SpanID().String())
			}
		}
	}
	return ids
}

// passThroughBatch admits the compressed requests into a pipeline whose one destination sends
// enc, and returns the batch it was handed.
func passThroughBatch(t *testing.T, enc pipeline.Encoding, plain, wire [][]byte) wireBatch {
	t.Helper()
	cfg := pipeline.DefaultConfig()
	cfg.Eager, cfg.BatchMaxAge = false, time.Hour
	rec := &wireRecorder{enc: enc}
	p, err := pipeline.New(cfg, []pipeline.Destination{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := 0
	for i := range plain {
		if _, err := p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: plain[i], Items: 1, Wire: wire[i], Encoding: enc}); err != nil {
			t.Fatal(err)
		}
		want += len(plain[i])
	}
	p.Flush()
	got := rec.batches()
	if len(got) != 1 {
		t.Fatalf("%d batches, want 1", len(got))
	}
	b := got[0]
	if b.enc != enc || b.items != len(plain) || b.plain != want {
		t.Fatalf("batch: encoding %v, %d items, %d bytes decompressed; want %v, %d, %d", b.enc, b.items, b.plain, enc, len(plain), want)
	}
	return b
}

// TestPassThroughBatchDecoders: a pass-through batch (concatenated gzip members; zstd frames
// behind an empty skippable frame) is read whole by every decompressor an upstream may use:
// grpc-go's gzip, the Collector's gRPC zstd and its HTTP decompression (confighttp), fasthttp's
// helpers and otlpgate's own codec. Each yields the concatenated requests, byte for byte, whose
// span ids are every request's, in order.
func TestPassThroughBatchDecoders(t *testing.T) {
	ours, err := codec.Compressors(codec.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	grpcOf := func(name string) encoding.Compressor { return encoding.GetCompressor(name) }
	for name, pkg := range map[string]string{
		codec.Zstd: "go.opentelemetry.io/collector/config/configgrpc/internal/grpccompression/zstd",
		codec.Gzip: "google.golang.org/grpc/encoding/gzip",
	} {
		if c := grpcOf(name); c == nil || reflect.TypeOf(c).Elem().PkgPath() != pkg {
			t.Fatalf("the registered gRPC %s compressor is %T, not %s's", name, c, pkg)
		}
	}
	collector := collectorHTTP(t)

	for _, enc := range []pipeline.Encoding{pipeline.EncodingGzip, pipeline.EncodingZstd} {
		t.Run(enc.String(), func(t *testing.T) {
			plain, wire, ids := compressedRequests(t, 5, enc)
			b := passThroughBatch(t, enc, plain, wire)
			want := bytes.Join(plain, nil)
			if enc == pipeline.EncodingZstd && !bytes.HasPrefix(b.body, pipeline.ZstdPreamble[:]) {
				t.Fatalf("a zstd batch begins % x, not with the skippable frame", b.body[:8])
			}
			decoders := map[string]func([]byte) ([]byte, error){
				"grpc-go": func(z []byte) ([]byte, error) { return viaGRPC(grpcOf(enc.String()), z) },
				"codec": func(z []byte) ([]byte, error) {
					for _, c := range ours {
						if c.Name() == enc.String() {
							return viaGRPC(c, z)
						}
					}
					return nil, fmt.Errorf("no %s in codec", enc)
				},
				"fasthttp": func(z []byte) ([]byte, error) {
					if enc == pipeline.EncodingGzip {
						return fasthttp.AppendGunzipBytes(nil, z)
					}
					return fasthttp.AppendUnzstdBytes(nil, z)
				},
				"collector-http": func(z []byte) ([]byte, error) { return collector(enc.String(), z) },
			}
			for name, dec := range decoders {
				got, err := dec(b.body)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: %d bytes decompressed, want the %d of the concatenated requests", name, len(got), len(want))
				}
				if got := spanIDs(t, got); strings.Join(got, ",") != strings.Join(ids, ",") {
					t.Fatalf("%s: span ids\n%v\nwant\n%v", name, got, ids)
				}
			}
		})
	}
}

// viaGRPC decompresses z as grpc-go does with a received message.
func viaGRPC(c encoding.Compressor, z []byte) ([]byte, error) {
	r, err := c.Decompress(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(r)
	if cl, ok := r.(io.Closer); ok {
		cl.Close()
	}
	return out, err
}

// collectorHTTP starts an HTTP server on 127.0.0.1 built by the Collector's confighttp (its
// decompression in front of a handler that returns the body it read) and returns a function
// that POSTs a body with a Content-Encoding and returns what the handler read.
func collectorHTTP(t *testing.T) func(encoding string, body []byte) ([]byte, error) {
	t.Helper()
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(b)
	})
	addr := strictsink.ServeCollectorHTTP(t, echo)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)
	url := "http://" + addr + "/v1/traces"
	return func(enc string, body []byte) ([]byte, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", enc)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("status %d: %s", resp.StatusCode, out)
		}
		return out, err
	}
}
