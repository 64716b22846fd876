package fastpath

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// otlpJSON renders m as an OTLP/HTTP client sends it: protojson with integer enums, and the
// trace and span ids turned from protojson's base64 into the hex the OTLP mapping asks for.
func otlpJSON(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		tb.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						tb.Fatal(err)
					}
					v[k] = hex.EncodeToString(raw)
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(tree)
	out, err := json.Marshal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// jsonBodies are span batches of the benchmark shapes (otlpgen.Small: 100 spans of 4
// attributes; otlpgen.Large: 500 spans of 10) as OTLP/JSON, and batches of 100 and 1000 spans
// as an SDK's OTLP/HTTP JSON exporter writes them (sdkTraceJSON), with their protobuf encoding.
func jsonBodies(tb testing.TB) []struct {
	name       string
	body, want []byte
	spans      int
} {
	g := otlpgen.New(1)
	var out []struct {
		name       string
		body, want []byte
		spans      int
	}
	for _, s := range []struct {
		name  string
		shape otlpgen.Shape
	}{{"small", otlpgen.Small}, {"large", otlpgen.Large}} {
		req := g.Spans(s.shape)
		want, err := req.MarshalVT()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, struct {
			name       string
			body, want []byte
			spans      int
		}{s.name, otlpJSON(tb, req), want, s.shape.Spans})
	}
	for _, s := range []struct {
		name  string
		spans int
	}{{"sdk", 100}, {"sdk-large", 1000}} {
		body := sdkTraceJSON(s.spans)
		out = append(out, struct {
			name       string
			body, want []byte
			spans      int
		}{s.name, body, fromOTLPJSON(tb, body), s.spans})
	}
	return out
}

// BenchmarkJSONTranscode measures a reused transcoder on span batches; bytes per second are
// of the JSON body. cpu-ns/op is the benchmark thread's CPU time, which a busy machine does not
// inflate as it does the wall time.
func BenchmarkJSONTranscode(b *testing.B) {
	for _, bb := range jsonBodies(b) {
		b.Run(bb.name, func(b *testing.B) {
			var tr JSONTranscoder
			dst, _, err := tr.AppendRequest(nil, Traces, bb.body)
			if err != nil || !bytes.Equal(dst, bb.want) {
				b.Fatalf("transcoding differs from MarshalVT: %v", err)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.body)))
			b.ResetTimer()
			start := threadCPU()
			for b.Loop() {
				dst, _, _ = tr.AppendRequest(dst[:0], Traces, bb.body)
			}
			reportJSONCPU(b, start, bb.spans)
		})
	}
}

// BenchmarkJSONTranscodeTree measures the tree transcoder that JSONTranscoder replaced
// (jsontree_test.go) on the same bodies, so that one run compares the two on the same machine
// under the same load.
func BenchmarkJSONTranscodeTree(b *testing.B) {
	for _, bb := range jsonBodies(b) {
		b.Run(bb.name, func(b *testing.B) {
			var tr treeTranscoder
			dst, _, err := tr.AppendRequest(nil, Traces, bb.body)
			if err != nil || !bytes.Equal(dst, bb.want) {
				b.Fatalf("transcoding differs from MarshalVT: %v", err)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.body)))
			b.ResetTimer()
			start := threadCPU()
			for b.Loop() {
				dst, _, _ = tr.AppendRequest(dst[:0], Traces, bb.body)
			}
			reportJSONCPU(b, start, bb.spans)
		})
	}
}

// reportJSONCPU reports wall time per span and the thread's CPU time per op since start.
func reportJSONCPU(b *testing.B, start time.Duration, spans int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
	if cpu := threadCPU() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
