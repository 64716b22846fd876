package fastpath_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// sameEntries reports whether the v1 request v1 and the OTEP request otep decode to equal
// entries and the id id, and carry the same unknown top-level fields in the same order.
func sameEntries(tb testing.TB, sig fastpath.Signal, v1, otep []byte, id uint64) error {
	tb.Helper()
	var eq bool
	switch sig {
	case fastpath.Traces:
		var a coltracev1.ExportTraceServiceRequest
		var b otepv1.TraceExportRequest
		if err := errors.Join(a.UnmarshalVT(v1), b.UnmarshalVT(otep)); err != nil {
			return err
		}
		eq = b.Id == id && slices.EqualFunc(a.ResourceSpans, b.ResourceSpans, (*tracev1.ResourceSpans).EqualVT)
	case fastpath.Metrics:
		var a colmetricsv1.ExportMetricsServiceRequest
		var b otepv1.MetricExportRequest
		if err := errors.Join(a.UnmarshalVT(v1), b.UnmarshalVT(otep)); err != nil {
			return err
		}
		eq = b.Id == id && slices.EqualFunc(a.ResourceMetrics, b.ResourceMetrics, (*metricsv1.ResourceMetrics).EqualVT)
	case fastpath.Logs:
		var a collogsv1.ExportLogsServiceRequest
		var b otepv1.LogExportRequest
		if err := errors.Join(a.UnmarshalVT(v1), b.UnmarshalVT(otep)); err != nil {
			return err
		}
		eq = b.Id == id && slices.EqualFunc(a.ResourceLogs, b.ResourceLogs, (*logsv1.ResourceLogs).EqualVT)
	}
	if !eq {
		return fmt.Errorf("%v: entries or id differ", sig)
	}
	if !bytes.Equal(unknownTop(v1, 1), unknownTop(otep, 2)) {
		return fmt.Errorf("%v: unknown top-level fields differ", sig)
	}
	return nil
}

// unknownTop returns the top-level fields of a well-formed request numbered above known,
// concatenated in order.
func unknownTop(b []byte, known protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil
		}
		if num > known {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// TestConvertMatchesMarshal checks AppendOTEP against the MarshalVT of the OTEP request with the
// same id and entries, byte for byte, and AppendV1 as its exact inverse.
func TestConvertMatchesMarshal(t *testing.T) {
	prefix := []byte("prefix")
	for _, fx := range fixtures(t) {
		for _, id := range ids {
			t.Run(fmt.Sprintf("%s/%d", fx.name, id), func(t *testing.T) {
				want := otepMarshal(t, fx.sig, id, fx.v1)
				dst := append([]byte(nil), prefix...)
				got, err := fastpath.AppendOTEP(dst, id, fx.v1)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
					t.Fatalf("AppendOTEP differs from MarshalVT (%d vs %d bytes)", len(got)-len(prefix), len(want))
				}
				if n := fastpath.OTEPSize(id, fx.v1); n != len(want) {
					t.Fatalf("OTEPSize = %d, want %d", n, len(want))
				}
				if err := sameEntries(t, fx.sig, fx.v1, got[len(prefix):], id); err != nil {
					t.Fatal(err)
				}

				back, gotID, err := fastpath.AppendV1(append([]byte(nil), prefix...), want)
				if err != nil {
					t.Fatal(err)
				}
				if gotID != id {
					t.Fatalf("AppendV1 id = %d, want %d", gotID, id)
				}
				if !bytes.Equal(back[:len(prefix)], prefix) || !bytes.Equal(back[len(prefix):], fx.v1) {
					t.Fatalf("AppendV1 does not give back the v1 request (%d vs %d bytes)", len(back)-len(prefix), len(fx.v1))
				}
			})
		}
	}
}

// TestConvertTopLevelFields covers top-level fields no encoder of ours writes: unknown fields
// (carried over in place), a long-form entry tag (rewritten short), several ids (the last
// wins).
func TestConvertTopLevelFields(t *testing.T) {
	entryA, entryB := msg(1, msg(3, []byte("a"))), msg(1, msg(3, []byte("bb")))
	otepA, otepB := msg(2, msg(3, []byte("a"))), msg(2, msg(3, []byte("bb")))
	unknown := cat(varintField(3, 300), msg(7, []byte("x")), fixed64Field(9, 1), protowire.AppendFixed32(tag(1000, protowire.Fixed32Type), 5))
	longTag := cat([]byte{0x8a, 0x80, 0x00}, protowire.AppendBytes(nil, []byte{0x1a, 0x00}))

	tests := []struct {
		name string
		id   uint64
		v1   []byte
		otep []byte
	}{
		{"unknown fields between entries", 5, cat(entryA, unknown, entryB), cat(varintField(1, 5), otepA, unknown, otepB)},
		{"unknown fields only", 0, unknown, unknown},
		{"unknown fields first, id 0", 0, cat(unknown, entryA), cat(unknown, otepA)},
		{"long-form entry tag", 1, cat(longTag, entryB), cat(varintField(1, 1), msg(2, []byte{0x1a, 0x00}), otepB)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fastpath.AppendOTEP(nil, tt.id, tt.v1)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.otep) {
				t.Fatalf("AppendOTEP = %x, want %x", got, tt.otep)
			}
			if n := fastpath.OTEPSize(tt.id, tt.v1); n != len(tt.otep) {
				t.Fatalf("OTEPSize = %d, want %d", n, len(tt.otep))
			}
			back, id, err := fastpath.AppendV1(nil, got)
			if err != nil || id != tt.id {
				t.Fatalf("AppendV1: id %d, %v", id, err)
			}
			// Round trip is exact except for the long tag, which comes back short.
			wantBack := bytes.Replace(tt.v1, longTag[:3], []byte{0x0a}, 1)
			if !bytes.Equal(back, wantBack) {
				t.Fatalf("AppendV1 = %x, want %x", back, wantBack)
			}
			for _, sig := range signals {
				if err := sameEntries(t, sig, tt.v1, got, tt.id); err != nil {
					t.Fatalf("%v: %v", sig, err)
				}
			}
		})
	}

	t.Run("last id wins", func(t *testing.T) {
		otep := cat(varintField(1, 9), otepA, varintField(1, 0), otepB, varintField(1, 77))
		v1, id, err := fastpath.AppendV1(nil, otep)
		if err != nil || id != 77 || !bytes.Equal(v1, cat(entryA, entryB)) {
			t.Fatalf("AppendV1 = %x, %d, %v", v1, id, err)
		}
		d, err := decode(fastpath.Logs, fastpath.LayoutOTEP, otep)
		if err != nil || d.id != 77 {
			t.Fatalf("decoder id %d, %v", d.id, err)
		}
		s, err := fastpath.ScanRequest(fastpath.Logs, otep, fastpath.LayoutOTEP, fastpath.DepthFull)
		if err != nil || s != (fastpath.Scan{Resources: 2, Items: 0, ID: 77, HasID: true}) {
			t.Fatalf("ScanRequest = %+v, %v", s, err)
		}
	})
	t.Run("explicit id 0", func(t *testing.T) {
		otep := cat(varintField(1, 0), otepA)
		s, err := fastpath.ScanRequest(fastpath.Traces, otep, fastpath.LayoutOTEP, fastpath.DepthTop)
		if err != nil || s != (fastpath.Scan{Resources: 1, Items: -1, HasID: true}) {
			t.Fatalf("ScanRequest = %+v, %v", s, err)
		}
	})
}

func TestConvertRejects(t *testing.T) {
	tests := []struct {
		name string
		v1   []byte // input of AppendOTEP, or nil
		otep []byte // input of AppendV1, or nil
		err  error
	}{
		{"v1 field 2", cat(msg(1), msg(2)), nil, fastpath.ErrFieldCollision},
		{"v1 field 2 as varint", varintField(2, 1), nil, fastpath.ErrFieldCollision},
		{"v1 entry as varint", varintField(1, 1), nil, fastpath.ErrWireType},
		{"v1 entry overflows", []byte{0x0a, 0x03, 0}, nil, fastpath.ErrLengthOverflow},
		{"v1 truncated tag", cat(msg(1), []byte{0x80}), nil, fastpath.ErrTruncated},
		{"v1 unknown group", cat(msg(1), tag(5, protowire.StartGroupType)), nil, fastpath.ErrGroup},
		{"v1 field number 0", []byte{0x00}, nil, fastpath.ErrFieldNumber},
		{"otep id as bytes", nil, msg(1), fastpath.ErrWireType},
		{"otep entry as varint", nil, varintField(2, 1), fastpath.ErrWireType},
		{"otep truncated id", nil, []byte{0x08, 0x80}, fastpath.ErrTruncated},
		{"otep id overflow", nil, []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, fastpath.ErrVarintOverflow},
		{"otep entry overflows", nil, cat(varintField(1, 1), []byte{0x12, 0x05}), fastpath.ErrLengthOverflow},
		{"otep unknown truncated", nil, cat(varintField(1, 1), tag(4, protowire.Fixed64Type), []byte{1}), fastpath.ErrTruncated},
		{"garbage", []byte("GET / HTTP/1.1\r\n"), []byte("GET / HTTP/1.1\r\n"), fastpath.ErrGroup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, 3, 64)
			if tt.v1 != nil {
				got, err := fastpath.AppendOTEP(dst, 42, tt.v1)
				if !errors.Is(err, tt.err) || len(got) != len(dst) {
					t.Fatalf("AppendOTEP: %d bytes, %v; want %d bytes, %v", len(got), err, len(dst), tt.err)
				}
				// On input AppendOTEP refuses, OTEPSize gives its upper bound: the id plus len(v1).
				if n := fastpath.OTEPSize(42, tt.v1); n != 2+len(tt.v1) {
					t.Fatalf("OTEPSize = %d for %d bytes", n, len(tt.v1))
				}
			}
			if tt.otep != nil {
				got, id, err := fastpath.AppendV1(dst, tt.otep)
				if !errors.Is(err, tt.err) || len(got) != len(dst) || id != 0 {
					t.Fatalf("AppendV1: %d bytes, id %d, %v; want %d bytes, %v", len(got), id, err, len(dst), tt.err)
				}
			}
		})
	}
}
