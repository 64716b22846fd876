package fastpath_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

var (
	depths  = []fastpath.Depth{fastpath.DepthTop, fastpath.DepthResource, fastpath.DepthFull}
	layouts = []fastpath.Layout{fastpath.LayoutV1, fastpath.LayoutOTEP}
	signals = []fastpath.Signal{fastpath.Traces, fastpath.Metrics, fastpath.Logs}
	ids     = []uint64{0, 1, 127, 128, 1 << 35, 1<<64 - 1}
)

// wantScan is what ScanRequest must report for a request that decodes to d.
func wantScan(d decoded, layout fastpath.Layout, depth fastpath.Depth) fastpath.Scan {
	s := fastpath.Scan{Resources: len(d.items), Items: d.total()}
	if depth == fastpath.DepthTop {
		s.Items = -1
	}
	if layout == fastpath.LayoutOTEP && d.id != 0 {
		s.ID, s.HasID = d.id, true
	}
	return s
}

// TestScanRequestCounts compares ScanRequest with the decoded message, for every request, in
// both layouts and at every depth.
func TestScanRequestCounts(t *testing.T) {
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			d, err := decode(fx.sig, fastpath.LayoutV1, fx.v1)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.items) != fx.resources || d.total() != fx.items {
				t.Fatalf("decoded %d resources, %d items; fixture says %d, %d", len(d.items), d.total(), fx.resources, fx.items)
			}
			for _, id := range ids {
				otep := otepMarshal(t, fx.sig, id, fx.v1)
				for _, depth := range depths {
					for _, layout := range layouts {
						b := fx.v1
						if layout == fastpath.LayoutOTEP {
							b = otep
						}
						if layout == fastpath.LayoutV1 && id != 0 {
							continue // the v1 bytes do not depend on id
						}
						dd, err := decode(fx.sig, layout, b)
						if err != nil {
							t.Fatal(err)
						}
						got, err := fastpath.ScanRequest(fx.sig, b, layout, depth)
						if err != nil {
							t.Fatalf("id %d %v %v: %v", id, layout, depth, err)
						}
						if want := wantScan(dd, layout, depth); got != want {
							t.Fatalf("id %d %v %v: got %+v, want %+v", id, layout, depth, got, want)
						}
					}
				}
			}
		})
	}
}

// Hand-encoded requests for the cases an encoder never writes.
func tag(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }

func msg(num protowire.Number, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	return protowire.AppendBytes(tag(num, protowire.BytesType), body)
}

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(tag(num, protowire.VarintType), v)
}

func fixed64Field(num protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(tag(num, protowire.Fixed64Type), v)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// numberPoint is one NumberDataPoint field (data_points = 1) with an as_int value.
var numberPoint = msg(1, fixed64Field(6, 42))

// metricsWith wraps metric fields in one Metric, one scope and one resource entry.
func metricsWith(metricFields ...[]byte) []byte {
	return msg(1, msg(2, msg(2, metricFields...)))
}

// TestScanRequestOneof checks that data points are counted the way a decoder keeps them when a
// Metric carries several members of its data oneof: the last member wins and repeats of that
// member merge.
func TestScanRequestOneof(t *testing.T) {
	gauge := func(n int) []byte {
		var pts [][]byte
		for range n {
			pts = append(pts, numberPoint)
		}
		return msg(5, pts...)
	}
	sum := func(n int) []byte {
		var pts [][]byte
		for range n {
			pts = append(pts, numberPoint)
		}
		return msg(7, pts...)
	}
	hist := msg(9, msg(1), msg(1), msg(1), msg(1))
	tests := []struct {
		name  string
		b     []byte
		items int
	}{
		{"gauge merged", metricsWith(gauge(2), gauge(1)), 3},
		{"gauge then sum", metricsWith(gauge(2), sum(1)), 1},
		{"gauge sum gauge", metricsWith(gauge(2), sum(4), gauge(1)), 1},
		{"name between runs", metricsWith(gauge(2), msg(1), gauge(3)), 5},
		{"histogram then summary", metricsWith(hist, msg(11, msg(1))), 1},
		{"sum then histogram", metricsWith(sum(3), hist), 4},
		{"exponential merged", metricsWith(msg(10, msg(1)), msg(10, msg(1), msg(1))), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decode(fastpath.Metrics, fastpath.LayoutV1, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if d.total() != tt.items {
				t.Fatalf("decoder counts %d, test says %d", d.total(), tt.items)
			}
			for _, depth := range depths[1:] {
				got, err := fastpath.ScanRequest(fastpath.Metrics, tt.b, fastpath.LayoutV1, depth)
				if err != nil {
					t.Fatalf("%v: %v", depth, err)
				}
				if got.Items != tt.items || got.Resources != 1 {
					t.Fatalf("%v: got %+v, want 1 resource, %d items", depth, got, tt.items)
				}
			}
		})
	}
}

// spanWith wraps span fields in one span, one scope and one resource entry.
func spanWith(spanFields ...[]byte) []byte { return msg(1, msg(2, msg(2, spanFields...))) }

// histPointWith wraps HistogramDataPoint fields in a histogram metric.
func histPointWith(fields ...[]byte) []byte { return metricsWith(msg(9, msg(1, fields...))) }

// bucketsWith wraps Buckets fields in the positive buckets of an exponential histogram point.
func bucketsWith(fields ...[]byte) []byte { return metricsWith(msg(10, msg(1, msg(8, fields...)))) }

// logBody returns a log request whose record's body is an AnyValue wrapped in levels array
// levels: the innermost AnyValue sits at nesting level 4+2*levels (entry 1, scope 2, record 3,
// body 4) and holds inner.
func logBody(levels int, inner []byte) []byte {
	v := inner
	for range levels {
		v = msg(5, msg(1, v)) // AnyValue.array_value.values
	}
	return msg(1, msg(2, msg(2, msg(5, v))))
}

// TestScanRequestAccepts covers well-formed inputs no encoder of ours writes: unknown fields at
// every level, the unpacked and packed forms of repeated scalars, and nesting at the cap.
func TestScanRequestAccepts(t *testing.T) {
	unknown := cat(varintField(99, 1<<63), fixed64Field(100, 1), protowire.AppendFixed32(tag(101, protowire.Fixed32Type), 1),
		msg(102, []byte("opaque")), varintField(protowire.MaxValidNumber, 0))
	tests := []struct {
		name      string
		sig       fastpath.Signal
		b         []byte
		resources int
		items     int
	}{
		{"unknown top-level", fastpath.Traces, cat(unknown, spanWith(), unknown), 1, 1},
		{"unknown in every walked message", fastpath.Traces,
			msg(1, unknown, msg(1, unknown), msg(2, unknown, msg(1, unknown), msg(2, unknown, msg(9, unknown, msg(2, unknown, msg(5, unknown)))))), 1, 1},
		{"reserved span status field", fastpath.Traces, spanWith(msg(15, varintField(1, 3))), 1, 1},
		{"reserved metric fields", fastpath.Metrics, metricsWith(msg(4, numberPoint), msg(6), varintField(8, 1)), 1, 0},
		{"unpacked bucket counts", fastpath.Metrics, histPointWith(fixed64Field(6, 1), fixed64Field(6, 2), fixed64Field(7, 3)), 1, 1},
		{"packed bucket counts", fastpath.Metrics, histPointWith(msg(6, make([]byte, 16)), msg(7)), 1, 1},
		{"unpacked exponential buckets", fastpath.Metrics, bucketsWith(varintField(2, 1), varintField(2, 300)), 1, 1},
		{"packed exponential buckets", fastpath.Metrics, bucketsWith(msg(2, protowire.AppendVarint(protowire.AppendVarint(nil, 300), 1<<64-1))), 1, 1},
		{"non-minimal varints", fastpath.Logs, msg(1, msg(2, []byte{2<<3 | 2, 0x80, 0x00}, []byte{0x9a, 0x80, 0x00, 0x00})), 1, 1},
		{"nesting at the cap", fastpath.Logs, logBody((fastpath.MaxNesting-4)/2, msg(1, []byte("leaf"))), 1, 1},
		{"empty and full-size ids", fastpath.Traces, spanWith(msg(1), msg(2, make([]byte, 8)), msg(4),
			msg(13, msg(1, make([]byte, 16)), msg(2)), msg(13, msg(1), msg(2, make([]byte, 8)))), 1, 1},
		{"ids with non-minimal lengths", fastpath.Traces, spanWith([]byte{0x0a, 0x90, 0x00}, make([]byte, 16), []byte{0x12, 0x80, 0x00}), 1, 1},
		{"ids out of order and repeated", fastpath.Traces, spanWith(msg(2, make([]byte, 8)), msg(5), msg(1, make([]byte, 16)), msg(1), msg(2, make([]byte, 8))), 1, 1},
		{"legacy scope entries, items not counted", fastpath.Traces, cat(msg(1, msg(1000, msg(2, msg(1, make([]byte, 16))), msg(3, []byte("s")))), spanWith()), 2, 1},
		{"log ids", fastpath.Logs, msg(1, msg(2, msg(2, msg(9, make([]byte, 16)), msg(10, make([]byte, 8))), msg(2, msg(9), msg(10)))), 1, 2},
		{"exemplar ids", fastpath.Metrics, metricsWith(msg(5, msg(1, msg(5, msg(4, make([]byte, 8)), msg(5, make([]byte, 16))), msg(5, msg(4), msg(5))))), 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decode(tt.sig, fastpath.LayoutV1, tt.b)
			if err != nil {
				t.Fatalf("UnmarshalVT: %v", err)
			}
			if len(d.items) != tt.resources || d.total() != tt.items {
				t.Fatalf("decoder counts %d, %d; test says %d, %d", len(d.items), d.total(), tt.resources, tt.items)
			}
			for _, depth := range depths {
				got, err := fastpath.ScanRequest(tt.sig, tt.b, fastpath.LayoutV1, depth)
				if err != nil {
					t.Fatalf("%v: %v", depth, err)
				}
				if want := wantScan(d, fastpath.LayoutV1, depth); got != want {
					t.Fatalf("%v: got %+v, want %+v", depth, got, want)
				}
			}
		})
	}
}

// TestScanRequestRejects checks that malformed requests are rejected with the right error, from
// the shallowest depth that can see the fault on (and accepted with the right counts below it).
func TestScanRequestRejects(t *testing.T) {
	deep := logBody((fastpath.MaxNesting-4)/2, msg(5)) // an empty ArrayValue one level past the cap
	tests := []struct {
		name   string
		sig    fastpath.Signal
		layout fastpath.Layout
		b      []byte
		from   fastpath.Depth // shallowest depth that rejects
		err    error
	}{
		{"http request", fastpath.Traces, fastpath.LayoutV1, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), fastpath.DepthTop, fastpath.ErrGroup},
		{"json request", fastpath.Logs, fastpath.LayoutV1, []byte(`{"resourceLogs":[]}`), fastpath.DepthTop, fastpath.ErrGroup},
		{"field number 0", fastpath.Traces, fastpath.LayoutV1, []byte{0x02, 0x00}, fastpath.DepthTop, fastpath.ErrFieldNumber},
		{"field number too large", fastpath.Traces, fastpath.LayoutV1, varintField(protowire.MaxValidNumber+1, 0), fastpath.DepthTop, fastpath.ErrFieldNumber},
		{"truncated tag", fastpath.Traces, fastpath.LayoutV1, []byte{0x80}, fastpath.DepthTop, fastpath.ErrTruncated},
		{"truncated length", fastpath.Traces, fastpath.LayoutV1, []byte{0x0a, 0x80}, fastpath.DepthTop, fastpath.ErrTruncated},
		{"length overflow", fastpath.Traces, fastpath.LayoutV1, []byte{0x0a, 0x05, 1, 2}, fastpath.DepthTop, fastpath.ErrLengthOverflow},
		{"huge length", fastpath.Traces, fastpath.LayoutV1, append([]byte{0x0a}, protowire.AppendVarint(nil, 1<<63)...), fastpath.DepthTop, fastpath.ErrLengthOverflow},
		{"varint overflow", fastpath.Traces, fastpath.LayoutV1, []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, fastpath.DepthTop, fastpath.ErrVarintOverflow},
		{"v1 entry as varint", fastpath.Traces, fastpath.LayoutV1, varintField(1, 7), fastpath.DepthTop, fastpath.ErrWireType},
		{"otep request read as v1", fastpath.Traces, fastpath.LayoutV1, cat(varintField(1, 7), msg(2)), fastpath.DepthTop, fastpath.ErrWireType},
		{"otep id as bytes", fastpath.Metrics, fastpath.LayoutOTEP, msg(1), fastpath.DepthTop, fastpath.ErrWireType},
		{"otep entry as fixed64", fastpath.Metrics, fastpath.LayoutOTEP, fixed64Field(2, 1), fastpath.DepthTop, fastpath.ErrWireType},
		{"otep truncated id", fastpath.Logs, fastpath.LayoutOTEP, []byte{0x08, 0xff}, fastpath.DepthTop, fastpath.ErrTruncated},
		{"unknown top-level group", fastpath.Traces, fastpath.LayoutV1, cat(spanWith(), tag(9, protowire.StartGroupType), tag(9, protowire.EndGroupType)), fastpath.DepthTop, fastpath.ErrGroup},
		{"unknown truncated fixed32", fastpath.Traces, fastpath.LayoutV1, cat(spanWith(), tag(9, protowire.Fixed32Type), []byte{1, 2, 3}), fastpath.DepthTop, fastpath.ErrTruncated},
		{"reserved wire type 7", fastpath.Traces, fastpath.LayoutV1, []byte{0x17}, fastpath.DepthTop, fastpath.ErrGroup},

		{"scope spans as varint", fastpath.Traces, fastpath.LayoutV1, msg(1, varintField(2, 1)), fastpath.DepthResource, fastpath.ErrWireType},
		{"resource schema url as fixed64", fastpath.Logs, fastpath.LayoutV1, msg(1, fixed64Field(3, 1)), fastpath.DepthResource, fastpath.ErrWireType},
		{"span as fixed32", fastpath.Traces, fastpath.LayoutV1, msg(1, msg(2, protowire.AppendFixed32(tag(2, protowire.Fixed32Type), 0))), fastpath.DepthResource, fastpath.ErrWireType},
		{"span overflows its scope", fastpath.Traces, fastpath.LayoutV1, msg(1, msg(2, []byte{0x12, 0x09, 0})), fastpath.DepthResource, fastpath.ErrLengthOverflow},
		{"metric name as varint", fastpath.Metrics, fastpath.LayoutV1, metricsWith(varintField(1, 1)), fastpath.DepthResource, fastpath.ErrWireType},
		{"gauge as varint", fastpath.Metrics, fastpath.LayoutV1, metricsWith(varintField(5, 1)), fastpath.DepthResource, fastpath.ErrWireType},
		{"data point as varint", fastpath.Metrics, fastpath.LayoutV1, metricsWith(msg(7, varintField(1, 1))), fastpath.DepthResource, fastpath.ErrWireType},
		{"group inside a resource entry", fastpath.Logs, fastpath.LayoutV1, msg(1, tag(50, protowire.StartGroupType)), fastpath.DepthResource, fastpath.ErrGroup},
		{"resource attribute as varint", fastpath.Traces, fastpath.LayoutV1, msg(1, msg(1, varintField(1, 1))), fastpath.DepthFull, fastpath.ErrWireType},

		{"span start time as varint", fastpath.Traces, fastpath.LayoutV1, spanWith(varintField(7, 1)), fastpath.DepthFull, fastpath.ErrWireType},
		{"span flags as fixed64", fastpath.Traces, fastpath.LayoutV1, spanWith(fixed64Field(16, 1)), fastpath.DepthFull, fastpath.ErrWireType},
		{"span name as varint", fastpath.Traces, fastpath.LayoutV1, spanWith(varintField(5, 1)), fastpath.DepthFull, fastpath.ErrWireType},
		{"span truncated fixed64", fastpath.Traces, fastpath.LayoutV1, spanWith(tag(7, protowire.Fixed64Type), []byte{1, 2, 3, 4}), fastpath.DepthFull, fastpath.ErrTruncated},
		{"attribute value as string", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(9, msg(2))), fastpath.DepthFull, nil},
		{"attribute value as varint", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(9, varintField(2, 1))), fastpath.DepthFull, fastpath.ErrWireType},
		{"array value as varint", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(2, msg(2, msg(5, varintField(5, 1))))), fastpath.DepthFull, fastpath.ErrWireType},
		{"double value as fixed32", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(2, msg(2, msg(5, protowire.AppendFixed32(tag(4, protowire.Fixed32Type), 0))))), fastpath.DepthFull, fastpath.ErrWireType},
		{"log time as varint", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(2, msg(2, varintField(1, 1)))), fastpath.DepthFull, fastpath.ErrWireType},
		{"log flags as varint", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(2, msg(2, varintField(8, 1)))), fastpath.DepthFull, fastpath.ErrWireType},
		{"group inside a span", fastpath.Traces, fastpath.LayoutV1, spanWith(tag(50, protowire.StartGroupType), tag(50, protowire.EndGroupType)), fastpath.DepthFull, fastpath.ErrGroup},
		{"packed bucket counts cut", fastpath.Metrics, fastpath.LayoutV1, histPointWith(msg(6, make([]byte, 12))), fastpath.DepthFull, fastpath.ErrPacked},
		{"packed bounds cut", fastpath.Metrics, fastpath.LayoutV1, histPointWith(msg(7, make([]byte, 7))), fastpath.DepthFull, fastpath.ErrPacked},
		{"bucket counts as varint", fastpath.Metrics, fastpath.LayoutV1, histPointWith(varintField(6, 1)), fastpath.DepthFull, fastpath.ErrWireType},
		{"packed varints cut", fastpath.Metrics, fastpath.LayoutV1, bucketsWith(msg(2, []byte{0x01, 0x80})), fastpath.DepthFull, fastpath.ErrPacked},
		{"packed varint overflow", fastpath.Metrics, fastpath.LayoutV1, bucketsWith(msg(2, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})), fastpath.DepthFull, fastpath.ErrVarintOverflow},
		{"exponential buckets as fixed64", fastpath.Metrics, fastpath.LayoutV1, bucketsWith(fixed64Field(2, 1)), fastpath.DepthFull, fastpath.ErrWireType},
		{"exemplar value as varint", fastpath.Metrics, fastpath.LayoutV1, metricsWith(msg(5, msg(1, msg(5, varintField(3, 1))))), fastpath.DepthFull, fastpath.ErrWireType},
		{"quantile as varint", fastpath.Metrics, fastpath.LayoutV1, metricsWith(msg(11, msg(1, msg(6, varintField(1, 1))))), fastpath.DepthFull, fastpath.ErrWireType},
		// The Collector's decoder refuses ids that are neither empty nor of their size.
		{"span trace id of 15 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(1, make([]byte, 15))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"span trace id of 17 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(1, make([]byte, 17))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"span trace id of a span id's size", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(1, make([]byte, 8))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"span trace id of 300 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(1, make([]byte, 300))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"span id of a trace id's size", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(1, make([]byte, 16)), msg(2, make([]byte, 16))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"span id of 1 byte", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(2, []byte{1})), fastpath.DepthFull, fastpath.ErrIDLength},
		{"parent span id of 9 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(4, make([]byte, 9))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"second trace id of 4 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(1, make([]byte, 16)), msg(5), msg(1, make([]byte, 4))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"link trace id of 12 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(13, msg(1, make([]byte, 12)))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"link span id of 7 bytes", fastpath.Traces, fastpath.LayoutV1, spanWith(msg(13, msg(1, make([]byte, 16)), msg(2, make([]byte, 7)))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"log trace id of 8 bytes", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(2, msg(2, msg(9, make([]byte, 8))))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"log span id of 16 bytes", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(2, msg(2, msg(10, make([]byte, 16))))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"gauge exemplar span id of 3 bytes", fastpath.Metrics, fastpath.LayoutV1, metricsWith(msg(5, msg(1, msg(5, msg(4, make([]byte, 3)))))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"gauge exemplar trace id of 15 bytes", fastpath.Metrics, fastpath.LayoutV1, metricsWith(msg(5, msg(1, msg(5, msg(5, make([]byte, 15)))))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"histogram exemplar trace id of 8 bytes", fastpath.Metrics, fastpath.LayoutV1, histPointWith(msg(8, msg(5, make([]byte, 8)))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"exponential exemplar span id of 16 bytes", fastpath.Metrics, fastpath.LayoutV1, metricsWith(msg(10, msg(1, msg(11, msg(4, make([]byte, 16)))))), fastpath.DepthFull, fastpath.ErrIDLength},
		// The scope entries of OTLP before 0.19 (1000, reserved since), which the Collector's
		// decoder still reads.
		{"legacy scope spans as varint", fastpath.Traces, fastpath.LayoutV1, msg(1, varintField(1000, 1)), fastpath.DepthResource, fastpath.ErrWireType},
		{"legacy scope spans with a span id of 3 bytes", fastpath.Traces, fastpath.LayoutV1, msg(1, msg(1000, msg(2, msg(2, make([]byte, 3))))), fastpath.DepthFull, fastpath.ErrIDLength},
		{"legacy scope metrics with a name not UTF-8", fastpath.Metrics, fastpath.LayoutV1, msg(1, msg(1000, msg(2, msg(1, []byte{0xff})))), fastpath.DepthFull, fastpath.ErrUTF8},
		{"legacy scope logs truncated inside", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(1000, []byte{0x12, 0x05, 0x08})), fastpath.DepthFull, fastpath.ErrLengthOverflow},
		{"legacy scope logs with a record time as varint", fastpath.Logs, fastpath.LayoutV1, msg(1, msg(1000, msg(2, varintField(1, 1)))), fastpath.DepthFull, fastpath.ErrWireType},
		{"span trace id as varint", fastpath.Traces, fastpath.LayoutV1, spanWith(varintField(1, 16)), fastpath.DepthFull, fastpath.ErrWireType},
		{"span trace id overflows the span", fastpath.Traces, fastpath.LayoutV1, spanWith([]byte{0x0a, 16, 1, 2}), fastpath.DepthFull, fastpath.ErrLengthOverflow},
		{"nesting past the cap", fastpath.Logs, fastpath.LayoutV1, deep, fastpath.DepthFull, fastpath.ErrNesting},
		{"nesting far past the cap", fastpath.Logs, fastpath.LayoutV1, logBody(10*fastpath.MaxNesting, nil), fastpath.DepthFull, fastpath.ErrNesting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, depth := range depths {
				_, err := fastpath.ScanRequest(tt.sig, tt.b, tt.layout, depth)
				want := tt.err
				if depth < tt.from {
					want = nil
				}
				if !errors.Is(err, want) {
					t.Fatalf("%v: err = %v, want %v", depth, err, want)
				}
			}
		})
	}
	// The nesting cap is ours: the decoder takes what the scanner refuses there.
	if _, err := decode(fastpath.Logs, fastpath.LayoutV1, deep); err != nil {
		t.Fatalf("UnmarshalVT of deep nesting: %v", err)
	}
}

func TestScanRequestBadArguments(t *testing.T) {
	b := spanWith()
	tests := []struct {
		name   string
		sig    fastpath.Signal
		layout fastpath.Layout
		depth  fastpath.Depth
		err    error
	}{
		{"signal", fastpath.Signal(3), fastpath.LayoutV1, fastpath.DepthFull, fastpath.ErrSignal},
		{"layout", fastpath.Traces, fastpath.Layout(2), fastpath.DepthFull, fastpath.ErrLayout},
		{"depth", fastpath.Traces, fastpath.LayoutV1, fastpath.Depth(3), fastpath.ErrDepth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := fastpath.ScanRequest(tt.sig, b, tt.layout, tt.depth)
			if err != tt.err || s != (fastpath.Scan{}) {
				t.Fatalf("got %+v, %v; want zero, %v", s, err, tt.err)
			}
		})
	}
}

// TestScanRequestTruncated cuts requests at every byte offset. A cut at a top-level field
// boundary leaves a shorter well-formed request, which must scan with the counts of the entries
// before the cut; a cut anywhere else must be rejected, at every depth.
func TestScanRequestTruncated(t *testing.T) {
	for _, fx := range fixtures(t) {
		if len(fx.v1) > 8000 {
			continue // quadratic; the small requests reach every kind of field
		}
		for _, layout := range layouts {
			t.Run(fmt.Sprintf("%s/%v", fx.name, layout), func(t *testing.T) {
				b := fx.v1
				if layout == fastpath.LayoutOTEP {
					b = otepMarshal(t, fx.sig, 1234567, fx.v1)
				}
				d, err := decode(fx.sig, layout, b)
				if err != nil {
					t.Fatal(err)
				}
				// want[k] is the scan of b[:k] for each top-level boundary k.
				want := map[int]decoded{0: {}}
				var cur decoded
				for off := 0; off < len(b); {
					num, _, n := protowire.ConsumeField(b[off:])
					if n < 0 {
						t.Fatalf("bad fixture at %d", off)
					}
					off += n
					if layout == fastpath.LayoutOTEP && num == 1 {
						cur.id = d.id
					} else {
						cur.items = append(cur.items[:len(cur.items):len(cur.items)], d.items[len(cur.items)])
					}
					want[off] = cur
				}
				for k := 0; k <= len(b); k++ {
					for _, depth := range depths {
						got, err := fastpath.ScanRequest(fx.sig, b[:k], layout, depth)
						w, boundary := want[k]
						switch {
						case !boundary && err == nil:
							t.Fatalf("cut at %d of %d, %v: accepted as %+v", k, len(b), depth, got)
						case boundary && err != nil:
							t.Fatalf("cut at boundary %d, %v: %v", k, depth, err)
						case boundary && got != wantScan(w, layout, depth):
							t.Fatalf("cut at boundary %d, %v: got %+v, want %+v", k, depth, got, wantScan(w, layout, depth))
						}
					}
				}
			})
		}
	}
}

func TestDepthLayoutString(t *testing.T) {
	f := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	f(fastpath.DepthTop.String(), "top")
	f(fastpath.DepthResource.String(), "resource")
	f(fastpath.DepthFull.String(), "full")
	f(fastpath.Depth(9).String(), "unknown")
	f(fastpath.LayoutV1.String(), "v1")
	f(fastpath.LayoutOTEP.String(), "otep")
	f(fastpath.Layout(9).String(), "unknown")
}
