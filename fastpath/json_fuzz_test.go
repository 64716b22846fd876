package fastpath

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// FuzzJSONTranscode feeds arbitrary bodies to the transcoder as each signal. It must never
// panic; on error dst keeps its length; on success the output keeps dst's prefix, ScanRequest
// at DepthFull accepts it with the same Scan, and the generated types decode it and re-encode
// it to the same bytes (the output is canonical), negative zero doubles aside, which MarshalVT
// drops and the transcoder keeps.
func FuzzJSONTranscode(f *testing.F) {
	for _, name := range []string{"traces.json", "metrics.json", "logs.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "json", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{}`, `[]`, `{"resourceSpans":[{}]}`, `{"resource_logs":[{"scope_logs":[{"log_records":[{}]}]}]}`,
		nestedArrays(10), span0(`"kind":"SPAN_KIND_SERVER","traceId":"AbCd00000000000000000000000000eF"`),
		`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"exponentialHistogram":{"dataPoints":[{"positive":{"bucketCounts":[1,"2"]}}]}}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	var tr JSONTranscoder
	f.Fuzz(func(t *testing.T, body []byte) {
		for sig := range NumSignals {
			prefix := []byte{0xaa, 0xbb}
			out, s, err := tr.AppendRequest(prefix, sig, body)
			if err != nil {
				if len(out) != len(prefix) || s != (Scan{}) {
					t.Fatalf("%v: error %v left %d bytes, Scan %+v", sig, err, len(out), s)
				}
				continue
			}
			if !bytes.HasPrefix(out, []byte{0xaa, 0xbb}) {
				t.Fatalf("%v: prefix lost", sig)
			}
			out = out[len(prefix):]
			want, err := ScanRequest(sig, out, LayoutV1, DepthFull)
			if err != nil {
				t.Fatalf("%v: ScanRequest refuses the output: %v", sig, err)
			}
			if want != s {
				t.Fatalf("%v: Scan %+v, ScanRequest %+v", sig, s, want)
			}
			var again []byte
			switch sig {
			case Traces:
				var m coltracev1.ExportTraceServiceRequest
				err = m.UnmarshalVT(out)
				again, _ = m.MarshalVT()
			case Metrics:
				var m colmetricsv1.ExportMetricsServiceRequest
				err = m.UnmarshalVT(out)
				again, _ = m.MarshalVT()
			case Logs:
				var m collogsv1.ExportLogsServiceRequest
				err = m.UnmarshalVT(out)
				again, _ = m.MarshalVT()
			}
			if err != nil {
				t.Fatalf("%v: UnmarshalVT refuses the output: %v", sig, err)
			}
			if !bytes.Equal(again, out) && !bytes.Contains(body, []byte("-0")) {
				t.Fatalf("%v: output not canonical\n got %x\nwant %x", sig, out, again)
			}
		}
	})
}
