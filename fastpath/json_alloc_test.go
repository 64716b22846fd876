//go:build !race

package fastpath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJSONTranscodeAllocs proves that a reused transcoder, writing into a buffer that has
// grown to size, allocates nothing: on span batches, on the hand-written examples of every
// signal (every value and metric type, enum names, base64 bytes), on the crafted shapes of
// json_memory_test.go and on a rejected body.
func TestJSONTranscodeAllocs(t *testing.T) {
	type input struct {
		name string
		sig  Signal
		body []byte
	}
	var inputs []input
	for _, bb := range jsonBodies(t) {
		inputs = append(inputs, input{bb.name, Traces, bb.body})
	}
	for _, f := range []struct {
		file string
		sig  Signal
	}{{"traces.json", Traces}, {"metrics.json", Metrics}, {"logs.json", Logs}} {
		b, err := os.ReadFile(filepath.Join("testdata", "json", f.file))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{f.file, f.sig, b})
	}
	for _, c := range craftedShapes {
		inputs = append(inputs, input{c.name, c.sig, c.body(64 << 10)})
	}
	inputs = append(inputs, input{"rejected", Traces, []byte(span0(`"traceId":"xyz0"`))})
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			var tr JSONTranscoder
			// Grow the buffers once. A rejected body hands back the caller's dst, so the caller's
			// buffer must have room of its own, as a pooled one does.
			dst, _, _ := tr.AppendRequest(make([]byte, 0, 4096), in.sig, in.body)
			if n := testing.AllocsPerRun(50, func() {
				dst, _, _ = tr.AppendRequest(dst[:0], in.sig, in.body)
			}); n != 0 {
				t.Fatalf("%v allocations per request, want 0", n)
			}
		})
	}
}
