package fastpath

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jsonEquivalenceSeeds are bodies that reach every branch of both transcoders: the
// hand-written examples, keys in every order, escapes of every kind, the edges of the
// tokenizer, and values nested up to the bounds.
func jsonEquivalenceSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"traces.json", "metrics.json", "logs.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "json", name))
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `null`, `"x"`, `1`, `{} x`, `{"resourceSpans":null}`,
		`{"resourceSpans":[{}]}`, `{"resourceSpans":[{},{"schemaUrl":"s"},{}]}`, `{"x":[1,-,e]}`,
		`{"resourceSpans":[{},{}],"x":[1,e,+1,1-2,.,NaN,-Inf,+nan,"\"",{"":{}}, [ ] , { } ]}`,
		`{"resource_logs":[{"scope_logs":[{"log_records":[{}]}]}]}`,
		nestedArrays(10), nestedArrays(49), nestedArrays(50), nestedArrays(150),
		span0(`"kind":"SPAN_KIND_SERVER","traceId":"AbCd"`),
		span0(`"status":{"code":2,"message":"m"},"name":"n","traceId":"00ff","flags":1,"kind":3`),
		span0(`"name":"a\u00e9\ud83d\ude00\ud800x\\u12\u0041\/\b\f\n\r\t\q","attributes":[{"value":{"stringValue":"v"},"key":"k"}]`),
		span0(`"tr\u0061ceId":"\u0030\u0031","n\u0061me":"","name":"x"`),
		span0(`"links":[{"flags":1,"traceId":"00"}],"events":[{"name":"e","timeUnixNano":"1"}],"attributes":[]`),
		`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"exponentialHistogram":{"dataPoints":[{"positive":{"bucketCounts":[1,"2"]}}]}}]}]}]}`,
		`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"explicitBounds":[1,"NaN",-0,1e3],"bucketCounts":["1",2],"sum":0}]}}]}]}]}`,
		`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asInt":"5","attributes":[{"key":"a"}],"timeUnixNano":1}]},"name":"g","metadata":[{"key":"m"}]}]}]}]}`,
		`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"AAEC/w=="}},{"body":{"bytesValue":"AAEC_w"}}]}]}]}`,
		`{"resourceLogs":[{"schemaUrl":"s","scopeLogs":[{"logRecords":[{"severityNumber":"SEVERITY_NUMBER_INFO"}]}],"resource":{"attributes":[]}}]}`,
		// Escapes and padding that narrow a length prefix from two bytes to one.
		span0(`"name":"` + strings.Repeat(`\u0041`, 22) + `"`),
		`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"` + base64.StdEncoding.EncodeToString(make([]byte, 127)) + `"}}]}]}]}`,
		// Keys that the previous object's order leads the reader to expect (memberKey's
		// hints), then keys that differ from the expected one in length, spelling, escapes,
		// whitespace or repetition, or that end the body.
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":1},{"name":"b","kind":2},{"names":"c","kind":3},` +
			`{"nam":"d"},{"name" :"e"},{"name": "f"},{"n\u0061me":"g"},{"kind":1,"name":"h"},{"name":"i","name_":1}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":1},{"name":"b","name":"c"}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":1},{"name":"b","kind":2}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":1},{"name":"b","kind":`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":1},{"name":"b","kind"`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":1},{"name":"b","kind`,
		`{"x":` + strings.Repeat(`[`, 299) + strings.Repeat(`]`, 299) + `}`,
		`{"x":` + strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300) + `}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	for _, s := range attrSeeds() {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// FuzzJSONStreamEquivalence holds the streaming transcoder to the tree-based one it replaced
// (jsontree_test.go): for every body and signal, both accept and write the same bytes with the
// same Scan, or both refuse. The error named may differ when a body has several faults (the
// tree parser found syntax errors first, the stream finds faults in reading order), and where
// the stream meets MaxNesting before the end of a body the tree parser refused for nesting
// past its depth cap.
func FuzzJSONStreamEquivalence(f *testing.F) {
	for _, s := range jsonEquivalenceSeeds(f) {
		f.Add(s)
	}
	var stream JSONTranscoder
	var tree treeTranscoder
	f.Fuzz(func(t *testing.T, body []byte) {
		checkJSONEquivalence(t, &stream, &tree, body)
	})
}

// TestJSONStreamEquivalence runs the fuzz target's seeds, and the bodies of the benchmark,
// the conformance-shaped renderings and keys sorted every way, in every go test run.
func TestJSONStreamEquivalence(t *testing.T) {
	var stream JSONTranscoder
	var tree treeTranscoder
	for _, s := range jsonEquivalenceSeeds(t) {
		checkJSONEquivalence(t, &stream, &tree, s)
	}
	for _, bb := range jsonBodies(t) {
		checkJSONEquivalence(t, &stream, &tree, bb.body)
	}
}

func checkJSONEquivalence(t *testing.T, stream *JSONTranscoder, tree *treeTranscoder, body []byte) {
	t.Helper()
	for sig := range NumSignals {
		got, gs, gerr := stream.AppendRequest([]byte("pfx"), sig, body)
		want, ws, werr := tree.AppendRequest([]byte("pfx"), sig, body)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%v: stream error %v, tree error %v\nbody: %q", sig, gerr, werr, body)
		}
		if !bytes.Equal(got, want) || gs != ws {
			t.Fatalf("%v: stream wrote %x %+v, tree %x %+v\nbody: %q", sig, got, gs, want, ws, body)
		}
	}
}
