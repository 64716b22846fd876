package filedest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// OTLP/JSON differs from protobuf's canonical JSON mapping in two ways that matter here: enums are
// written as integers, and trace and span ids as lower-case hex rather than base64.
var jsonOpts = protojson.MarshalOptions{UseEnumNumbers: true}

// idFields are the JSON names of every id field in the OTLP v1 schema (spans, links, log records,
// exemplars). Field names can only collide with these where they are ids: attribute keys are
// values of a "key" member, never object keys.
var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// AppendJSONLine appends one OTLP/JSON document for the v1 export request body of sig, followed by
// a newline. It decodes the body: the file destination is a development and debugging aid, not
// part of the hot path.
func AppendJSONLine(dst []byte, sig fastpath.Signal, body []byte) ([]byte, error) {
	var msg interface {
		proto.Message
		UnmarshalVT([]byte) error
	}
	switch sig {
	case fastpath.Traces:
		msg = &coltracev1.ExportTraceServiceRequest{}
	case fastpath.Metrics:
		msg = &colmetricsv1.ExportMetricsServiceRequest{}
	case fastpath.Logs:
		msg = &collogsv1.ExportLogsServiceRequest{}
	default:
		return dst, fmt.Errorf("filedest: unknown signal %d", sig)
	}
	if err := msg.UnmarshalVT(body); err != nil {
		return dst, fmt.Errorf("filedest: cannot decode %s request: %w", sig, err)
	}
	raw, err := jsonOpts.Marshal(msg)
	if err != nil {
		return dst, fmt.Errorf("filedest: cannot encode %s request: %w", sig, err)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return dst, fmt.Errorf("filedest: cannot re-read JSON: %w", err)
	}
	if err := hexIDs(doc); err != nil {
		return dst, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return dst, fmt.Errorf("filedest: cannot encode JSON: %w", err)
	}
	dst = append(dst, out...)
	return append(dst, '\n'), nil
}

// hexIDs rewrites, in place, every id member from base64 to hex.
func hexIDs(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if s, ok := e.(string); ok && idFields[k] {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return fmt.Errorf("filedest: id %s is not base64: %w", k, err)
				}
				t[k] = hex.EncodeToString(b)
				continue
			}
			if err := hexIDs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range t {
			if err := hexIDs(e); err != nil {
				return err
			}
		}
	}
	return nil
}
