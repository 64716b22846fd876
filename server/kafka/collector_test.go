package kafka

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// A push the full-depth scan refuses goes through the decoder, which must not pass on what the
// OpenTelemetry Collector's decoder refuses: an exemplar id of the wrong length or a malformed
// pre-0.19 scope entry (field 1000) would cost the batch the push joins. Each payload below
// reaches the decoder, most for an empty group the scan refuses before it sees the rest (the
// group keeps its old fate: forwarded); the outcome is the same by both paths.
func TestDecodedPathRefusesWhatTheCollectorRefuses(t *testing.T) {
	group := append(protowire.AppendTag(nil, 50, protowire.StartGroupType), protowire.AppendTag(nil, 50, protowire.EndGroupType)...)
	point := func(first []byte, exTraceID, exSpanID []byte) []byte {
		return field(1, first, varintField(8, 1), field(5, field(4, exSpanID), field(5, exTraceID)))
	}
	gauge := func(points ...[]byte) []byte { return field(2, str(1, "m"), field(5, points...)) }
	entry := func(parts ...[]byte) []byte { return field(1, parts...) }
	ok16, ok8 := make([]byte, 16), make([]byte, 8)
	for _, tc := range []struct {
		name    string
		payload []byte
		refused bool
	}{
		{"exemplar trace id of 15 bytes", entry(field(2, gauge(point(nil, make([]byte, 15), ok8)))), true},
		{"group, then an exemplar span id of 16 bytes", entry(field(2, gauge(point(group, ok16, ok16)))), true},
		{"group, then well-formed ids", entry(field(2, gauge(point(group, ok16, ok8)))), false},
		{"group, then a malformed field 1000", entry(group, field(2, gauge(point(nil, ok16, ok8))), varintField(1000, 1)), true},
		{"group, then field 1000 holding a metric name as varint", entry(group, field(2, gauge(point(nil, ok16, ok8))), field(1000, field(2, varintField(1, 1)))), true},
		{"group, then field 1000 with an exemplar trace id of 3 bytes", entry(group, field(1000, gauge(point(nil, make([]byte, 3), ok8)))), true},
		{"group, then a well-formed field 1000", entry(group, field(2, gauge(point(nil, ok16, ok8))), field(1000, gauge(point(nil, ok16, ok8)))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fastpath.ScanRequest(fastpath.Metrics, tc.payload, fastpath.LayoutV1, fastpath.DepthFull); err == nil {
				t.Fatal("the scan accepts the payload: the test does not reach the decoding path")
			}
			got := checkSame(t, tc.payload, &plan{all: true})
			if refused := errors.Is(got.err, errNotMetricsData); refused != tc.refused || !refused && (got.err != nil || !got.sent || got.points != 1) {
				t.Fatalf("outcome %+v, want refused %v (or 1 point sent)", got, tc.refused)
			}
		})
	}
}
