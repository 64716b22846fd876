package fastpath

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// craftedJSON is a body of about n bytes made of one shape repeated: the shapes that cost a
// parsed tree many times their size (a value and a pointer per token, a key-value pair per
// member) while they write little or nothing.
type craftedJSON struct {
	name string
	sig  Signal
	body func(n int) []byte
}

// repeatJSON writes head, then unit joined by sep until the body reaches n bytes, then tail.
func repeatJSON(n int, head, unit, sep, tail string) []byte {
	b := make([]byte, 0, n+len(head)+len(unit)+len(tail))
	b = append(b, head...)
	for first := true; len(b) < n; first = false {
		if !first {
			b = append(b, sep...)
		}
		b = append(b, unit...)
	}
	return append(b, tail...)
}

// deepBody is one log body nested depth levels through arrayValue (2 messages a level).
func deepBody(depth int) string {
	return `{"body":` + strings.Repeat(`{"arrayValue":{"values":[`, depth) + `{"intValue":1}` +
		strings.Repeat(`]}}`, depth) + `}`
}

var craftedShapes = []craftedJSON{
	{"empty objects in a known list", Logs, func(n int) []byte {
		return repeatJSON(n, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[`, `{}`, `,`, `]}]}]}`)
	}},
	{"empty objects in an unknown field", Logs, func(n int) []byte {
		return repeatJSON(n, `{"resourceLogs":[{}],"x":[`, `{}`, `,`, `]}`)
	}},
	{"empty arrays in an unknown field", Traces, func(n int) []byte {
		return repeatJSON(n, `{"x":[`, `[]`, `,`, `],"resourceSpans":[{}]}`)
	}},
	{"tiny values in an unknown field", Metrics, func(n int) []byte {
		return repeatJSON(n, `{"resourceMetrics":[{}],"x":[`, `0`, `,`, `]}`)
	}},
	{"many keys in an unknown object", Traces, func(n int) []byte {
		return repeatJSON(n, `{"resourceSpans":[{"x":{`, `"":0`, `,`, `}}]}`)
	}},
	{"tiny values in a packed field", Metrics, func(n int) []byte {
		return repeatJSON(n, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"explicitBounds":[`,
			`0`, `,`, `]}]}}]}]}]}`)
	}},
	{"deep nesting within MaxNesting", Logs, func(n int) []byte {
		// 48 levels: 4 messages above the body, 2 a level, just under MaxNesting.
		return repeatJSON(n, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[`, deepBody((MaxNesting-5)/2), `,`, `]}]}]}`)
	}},
	{"deep unknown values within maxJSONDepth", Traces, func(n int) []byte {
		unit := strings.Repeat(`[`, maxJSONDepth-3) + strings.Repeat(`]`, maxJSONDepth-3)
		return repeatJSON(n, `{"resourceSpans":[{}],"x":[`, unit, `,`, `]}`)
	}},
}

// TestJSONMemoryBounded transcodes crafted bodies of 4 MiB, the shapes that took a parsed
// tree to many times their size, and holds what the transcoder allocates to the output it
// writes: the output buffer growing from nil (at most about 6 times the output through append's
// growth) and a fixed allowance for the transcoder's own state, whose size follows the nesting
// depth, not the body.
func TestJSONMemoryBounded(t *testing.T) {
	const size = 4 << 20
	const fixed = 64 << 10
	for _, c := range craftedShapes {
		t.Run(c.name, func(t *testing.T) {
			body := c.body(size)
			tr := new(JSONTranscoder)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			out, s, err := tr.AppendRequest(nil, c.sig, body)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("%v\n%.200s", err, body)
			}
			if s.Resources == 0 {
				t.Fatalf("Scan %+v: the body writes no resource entry", s)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			bound := 8*uint64(len(out)) + fixed
			t.Logf("body %d bytes, output %d bytes, allocated %d bytes (bound %d)", len(body), len(out), allocated, bound)
			if allocated > bound {
				t.Fatalf("allocated %d bytes for a %d-byte body writing %d bytes; want at most %d",
					allocated, len(body), len(out), bound)
			}
			// The output is what ScanRequest accepts, with the same counts.
			if want, err := ScanRequest(c.sig, out, LayoutV1, DepthFull); err != nil || want != s {
				t.Fatalf("ScanRequest: %+v, %v; transcoder said %+v", want, err, s)
			}
		})
	}
}

// TestJSONCraftedEquivalence holds the crafted shapes, at a size the tree transcoder parses
// quickly, to the tree transcoder's bytes.
func TestJSONCraftedEquivalence(t *testing.T) {
	var stream JSONTranscoder
	var tree treeTranscoder
	for _, c := range craftedShapes {
		body := c.body(64 << 10)
		got, gs, err := stream.AppendRequest(nil, c.sig, body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, ws, err := tree.AppendRequest(nil, c.sig, body)
		if err != nil || !bytes.Equal(got, want) || gs != ws {
			t.Fatalf("%s: stream and tree differ (%v)", c.name, err)
		}
	}
}
