package filedest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

func TestJSONLineTraces(t *testing.T) {
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
			TraceId:           []byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c},
			SpanId:            []byte{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74},
			ParentSpanId:      []byte{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x73},
			Name:              "I'm a server span",
			Kind:              tracev1.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: 1544712660000000000,
			Attributes: []*commonv1.KeyValue{{Key: "traceId", Value: &commonv1.AnyValue{
				Value: &commonv1.AnyValue_BytesValue{BytesValue: []byte{1, 2}}}}},
			Links: []*tracev1.Span_Link{{TraceId: []byte{0xab, 0xcd}, SpanId: []byte{0x01}}},
		}}}},
	}}}
	body, _ := req.MarshalVT()
	line, err := AppendJSONLine(nil, fastpath.Traces, body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
		t.Fatalf("not one line: %q", line)
	}
	var doc struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					TraceID, SpanID, ParentSpanID, Name, StartTimeUnixNano string
					Kind                                                   int
					Attributes                                             []struct {
						Key   string
						Value map[string]string
					}
					Links []struct{ TraceID, SpanID string }
				}
			}
		}
	}
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	sp := doc.ResourceSpans[0].ScopeSpans[0].Spans[0]
	for _, c := range [][2]string{
		{sp.TraceID, "5b8efff798038103d269b633813fc60c"},
		{sp.SpanID, "eee19b7ec3c1b174"},
		{sp.ParentSpanID, "eee19b7ec3c1b173"},
		{sp.Name, "I'm a server span"},
		{sp.StartTimeUnixNano, "1544712660000000000"},
		{sp.Links[0].TraceID, "abcd"},
		{sp.Links[0].SpanID, "01"},
		// bytes attribute values stay base64, as OTLP/JSON requires.
		{sp.Attributes[0].Value["bytesValue"], "AQI="},
	} {
		if c[0] != c[1] {
			t.Errorf("got %q, want %q", c[0], c[1])
		}
	}
	if sp.Kind != 2 {
		t.Errorf("kind = %d, want the integer 2", sp.Kind)
	}
}

func TestJSONLineLogsAndErrors(t *testing.T) {
	req := &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{ScopeLogs: []*logsv1.ScopeLogs{{
		LogRecords: []*logsv1.LogRecord{{SeverityNumber: logsv1.SeverityNumber_SEVERITY_NUMBER_WARN, TraceId: []byte{0xff}, Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "hello"}}}},
	}}}}}
	body, _ := req.MarshalVT()
	line, err := AppendJSONLine([]byte("x"), fastpath.Logs, body)
	if err != nil {
		t.Fatal(err)
	}
	want := `x{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"hello"},"severityNumber":13,"traceId":"ff"}]}]}]}` + "\n"
	if string(line) != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	if _, err := AppendJSONLine(nil, fastpath.Metrics, []byte{0x0a, 0x05, 1}); err == nil {
		t.Fatal("truncated body accepted")
	}
}
