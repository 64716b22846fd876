package fastpath

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nestedArrays is a log body of depth AnyValues nested through arrayValue: each level is one
// AnyValue and one ArrayValue message.
func nestedArrays(depth int) string {
	return `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":` +
		strings.Repeat(`{"arrayValue":{"values":[`, depth) + `{"intValue":1}` +
		strings.Repeat(`]}}`, depth) + `}]}]}]}`
}

// TestJSONHostile feeds malformed and hostile bodies: each gets its sentinel error, dst comes
// back with its length, and the transcoder stays usable for the next, valid body.
func TestJSONHostile(t *testing.T) {
	span := func(fields string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{` + fields + `}]}]}]}`
	}
	tests := []struct {
		name string
		sig  Signal
		body string
		want error
	}{
		{"empty body", Traces, ``, ErrJSONSyntax},
		{"not JSON", Traces, `{"resourceSpans":[`, ErrJSONSyntax},
		{"trailing garbage", Traces, `{} {}`, ErrJSONSyntax},
		{"top level array", Traces, `[]`, ErrJSONType},
		{"top level string", Traces, `"x"`, ErrJSONType},
		{"entries not array", Traces, `{"resourceSpans":{}}`, ErrJSONType},
		{"entry not object", Traces, `{"resourceSpans":[1]}`, ErrJSONType},
		{"null entry", Traces, `{"resourceSpans":[null]}`, ErrJSONType},
		{"duplicate top level", Traces, `{"resourceSpans":[],"resource_spans":[]}`, ErrJSONDuplicate},
		{"duplicate key", Traces, span(`"name":"a","name":"b"`), ErrJSONDuplicate},
		{"duplicate across spellings", Traces, span(`"traceId":"00000000000000000000000000000001","trace_id":"00000000000000000000000000000001"`), ErrJSONDuplicate},
		{"duplicate null", Traces, span(`"name":null,"name":"b"`), ErrJSONDuplicate},
		{"two oneof members", Logs, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a","intValue":1}}]}]}]}`, ErrJSONOneof},
		{"two metric types", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{},"sum":{}}]}]}]}`, ErrJSONOneof},
		{"odd hex", Traces, span(`"traceId":"abc"`), ErrJSONHex},
		{"bad hex", Traces, span(`"spanId":"zz00000000000000"`), ErrJSONHex},
		{"base64 id", Traces, span(`"traceId":"W47/95gDgQPSabYzgT/GDA=="`), ErrJSONHex},
		// Ids of a size the Collector refuses, as the scan refuses them (ErrIDLength).
		{"trace id of 2 bytes", Traces, span(`"traceId":"AbCd"`), ErrIDLength},
		{"trace id of a span id's size", Traces, span(`"traceId":"0102030405060708"`), ErrIDLength},
		{"span id of a trace id's size", Traces, span(`"spanId":"0102030405060708090a0b0c0d0e0f10"`), ErrIDLength},
		{"parent span id of 9 bytes", Traces, span(`"parentSpanId":"010203040506070809"`), ErrIDLength},
		{"link trace id of 17 bytes", Traces, span(`"links":[{"traceId":"0102030405060708090a0b0c0d0e0f1011"}]`), ErrIDLength},
		{"log span id of 1 byte", Logs, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"spanId":"01"}]}]}]}`, ErrIDLength},
		{"exemplar trace id of 4 bytes", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"exemplars":[{"traceId":"01020304"}]}]}}]}]}]}`, ErrIDLength},
		{"bad base64", Logs, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"!!!!"}}]}]}]}`, ErrJSONBase64},
		{"huge integer", Traces, span(`"startTimeUnixNano":"184467440737095516160"`), ErrJSONNumber},
		{"uint64 overflow by one", Traces, span(`"startTimeUnixNano":18446744073709551616`), ErrJSONNumber},
		{"negative fixed64", Traces, span(`"startTimeUnixNano":-1`), ErrJSONNumber},
		{"uint32 overflow", Traces, span(`"droppedAttributesCount":4294967296`), ErrJSONNumber},
		{"int32 overflow", Traces, span(`"kind":2147483648`), ErrJSONNumber},
		{"fractional integer", Traces, span(`"startTimeUnixNano":1.5`), ErrJSONNumber},
		{"exponent integer", Traces, span(`"startTimeUnixNano":1e3`), ErrJSONNumber},
		{"integer with plus", Traces, span(`"startTimeUnixNano":"+1"`), ErrJSONNumber},
		{"integer with space", Traces, span(`"startTimeUnixNano":" 1"`), ErrJSONNumber},
		{"empty integer string", Traces, span(`"startTimeUnixNano":""`), ErrJSONNumber},
		{"huge double", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":1e999}]}}]}]}]}`, ErrJSONNumber},
		{"bare NaN", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":NaN}]}}]}]}]}`, ErrJSONNumber},
		{"bare inf", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":-inf}]}}]}]}]}`, ErrJSONNumber},
		{"lower-case nan string", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":"nan"}]}}]}]}]}`, ErrJSONNumber},
		{"double as object", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":{}}]}}]}]}]}`, ErrJSONType},
		{"unknown enum name", Traces, span(`"kind":"SPAN_KIND_SIDEWAYS"`), ErrJSONEnum},
		{"enum name of another enum", Traces, span(`"kind":"STATUS_CODE_OK"`), ErrJSONEnum},
		{"lower-case enum name", Traces, span(`"kind":"span_kind_server"`), ErrJSONEnum},
		{"bool as string", Traces, `{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"boolValue":"true"}}]}}]}`, ErrJSONType},
		{"string as number", Traces, span(`"name":1`), ErrJSONType},
		{"message as array", Traces, span(`"status":[]`), ErrJSONType},
		{"repeated as object", Traces, span(`"attributes":{}`), ErrJSONType},
		{"null in repeated", Traces, span(`"events":[null]`), ErrJSONType},
		{"invalid UTF-8", Traces, span("\"name\":\"a\xffb\""), ErrJSONUTF8},
		{"truncated UTF-8", Traces, span("\"name\":\"\xe2\x82\""), ErrJSONUTF8},
		{"nesting past MaxNesting", Logs, nestedArrays(60), ErrNesting},
		// The stream refuses at the first fault it meets: here MaxNesting, long before the
		// values nest past maxJSONDepth.
		{"nesting far past MaxNesting", Logs, nestedArrays(150), ErrNesting},
		{"deep unknown field", Traces, `{"x":` + strings.Repeat(`[`, 400) + strings.Repeat(`]`, 400) + `}`, ErrJSONSyntax},
		{"unknown field one past maxJSONDepth", Traces, `{"x":` + strings.Repeat(`[`, maxJSONDepth) + strings.Repeat(`]`, maxJSONDepth) + `}`, ErrJSONSyntax},
		{"deep unknown field in a span", Traces, span(`"x":` + strings.Repeat(`{"a":`, 300) + `1` + strings.Repeat(`}`, 300)), ErrJSONSyntax},
		{"unclosed deep unknown field", Traces, `{"x":` + strings.Repeat(`[{"a":`, 100), ErrJSONSyntax},
	}
	var tr JSONTranscoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			got, s, err := tr.AppendRequest(dst, tt.sig, []byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if string(got) != "keep" || s != (Scan{}) {
				t.Fatalf("on error got %q, %+v; want dst unchanged and a zero Scan", got, s)
			}
			body, err := os.ReadFile(filepath.Join("testdata", "json", "traces.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := exampleTraces.MarshalVT()
			if got, _, err := tr.AppendRequest(nil, Traces, body); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("transcoder broken after the error: %v", err)
			}
		})
	}
}

// TestJSONLenient pins what is accepted beyond the strict mapping, with the exact result.
func TestJSONLenient(t *testing.T) {
	tests := []struct {
		name string
		sig  Signal
		body string
		want Scan
		hex  string // the expected output, in hex
	}{
		{"empty object", Traces, `{}`, Scan{}, ""},
		{"null entries", Traces, `{"resourceSpans":null}`, Scan{}, ""},
		{"unknown top-level field", Logs, `{"resourceLogs":[{}],"other":{"a":[1,{"b":null}]}}`, Scan{Resources: 1}, "0a00"},
		{"other signal's entries ignored", Metrics, `{"resourceSpans":[{}]}`, Scan{}, ""},
		{"null field is absent", Traces, `{"resourceSpans":[{"resource":null,"schemaUrl":null}]}`, Scan{Resources: 1}, "0a00"},
		{"zero scalars left out", Traces, span0(`"name":"","kind":0,"startTimeUnixNano":"0","traceId":""`), Scan{Resources: 1, Items: 1}, "0a0412021200"},
		{"negative enum", Traces, span0(`"kind":-1`), Scan{Resources: 1, Items: 1}, "0a0f120d120b30ffffffffffffffffff01"},
		{"upper-case hex", Traces, span0(`"spanId":"ABCDEF0123456789"`), Scan{Resources: 1, Items: 1}, "0a0e120c120a1208abcdef0123456789"},
		{"numeric string double", Metrics, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":"-0.5"}]}}]}]}]}`,
			Scan{Resources: 1, Items: 1}, "0a11120f120d2a0b0a0921000000000000e0bf"},
		{"escaped key", Traces, span0(`"n\u0061me":"x"`), Scan{Resources: 1, Items: 1}, "0a07120512032a0178"},
		{"unknown field at maxJSONDepth", Traces, `{"x":` + strings.Repeat(`[`, maxJSONDepth-1) + strings.Repeat(`]`, maxJSONDepth-1) + `}`, Scan{}, ""},
	}
	var tr JSONTranscoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, s, err := tr.AppendRequest(nil, tt.sig, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if s != tt.want {
				t.Fatalf("Scan %+v, want %+v", s, tt.want)
			}
			if h := hexString(got); h != tt.hex {
				t.Fatalf("bytes %s, want %s", h, tt.hex)
			}
		})
	}
}

func span0(fields string) string {
	return `{"resourceSpans":[{"scopeSpans":[{"spans":[{` + fields + `}]}]}]}`
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
