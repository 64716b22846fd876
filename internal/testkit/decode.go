package testkit

import (
	"encoding/binary"
	"testing"

	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// SpanIDs decodes body, the encoded body of a v1 ExportTraceServiceRequest (what a batch of
// traces holds), and returns the id of each span in order, as the first 8 bytes of the span id
// read big-endian: the generators of the tests make ids unique in those bytes.
func SpanIDs(body []byte) ([]uint64, error) {
	var req coltracev1.ExportTraceServiceRequest
	if err := req.UnmarshalVT(body); err != nil {
		return nil, err
	}
	return ResourceSpanIDs(req.ResourceSpans), nil
}

// ResourceSpanIDs returns the ids (as SpanIDs reads them) of the spans in rs, in order.
func ResourceSpanIDs(rs []*tracev1.ResourceSpans) []uint64 {
	var ids []uint64
	for _, r := range rs {
		for _, ss := range r.ScopeSpans {
			for _, sp := range ss.Spans {
				ids = append(ids, SpanID(sp.SpanId))
			}
		}
	}
	return ids
}

// SpanID reads a span id as SpanIDs does; a shorter id reads as if padded with zeros.
func SpanID(id []byte) uint64 {
	var b [8]byte
	copy(b[:], id)
	return binary.BigEndian.Uint64(b[:])
}

// Traces decodes a v1 trace body, failing the test if it does not decode.
func Traces(t testing.TB, body []byte) *coltracev1.ExportTraceServiceRequest {
	t.Helper()
	var req coltracev1.ExportTraceServiceRequest
	if err := req.UnmarshalVT(body); err != nil {
		t.Fatalf("trace body of %d bytes does not decode: %v", len(body), err)
	}
	return &req
}

// Metrics decodes a v1 metrics body, failing the test if it does not decode.
func Metrics(t testing.TB, body []byte) *colmetricsv1.ExportMetricsServiceRequest {
	t.Helper()
	var req colmetricsv1.ExportMetricsServiceRequest
	if err := req.UnmarshalVT(body); err != nil {
		t.Fatalf("metrics body of %d bytes does not decode: %v", len(body), err)
	}
	return &req
}

// Logs decodes a v1 logs body, failing the test if it does not decode.
func Logs(t testing.TB, body []byte) *collogsv1.ExportLogsServiceRequest {
	t.Helper()
	var req collogsv1.ExportLogsServiceRequest
	if err := req.UnmarshalVT(body); err != nil {
		t.Fatalf("logs body of %d bytes does not decode: %v", len(body), err)
	}
	return &req
}
