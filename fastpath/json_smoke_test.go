package fastpath

import (
	"testing"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestJSONSmoke(t *testing.T) {
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"my.service"}}]},"scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0"},"spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","parentSpanId":"EEE19B7EC3C1B173","name":"I'm a server span","startTimeUnixNano":"1544712660000000000","endTimeUnixNano":1544712661000000000,"kind":2,"attributes":[{"key":"my.span.attr","value":{"stringValue":"some value"}}]}]}]}]}`
	var tr JSONTranscoder
	out, s, err := tr.AppendRequest(nil, Traces, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var m coltracev1.ExportTraceServiceRequest
	if err := m.UnmarshalVT(out); err != nil {
		t.Fatal(err)
	}
	t.Log(s, protojson.Format(&m))
	b, _ := m.MarshalVT()
	if string(b) != string(out) {
		t.Fatalf("not canonical\n%x\n%x", out, b)
	}
}
