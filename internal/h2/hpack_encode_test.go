package h2

import (
	"bytes"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// precomputed are the frames otlpgate answers and calls with.
func precomputed(t *testing.T) map[string]struct {
	frame     *HeadersFrame
	fields    []HeaderField
	endStream bool
} {
	out := map[string]struct {
		frame     *HeadersFrame
		fields    []HeaderField
		endStream bool
	}{}
	add := func(name string, endStream bool, fields []HeaderField) {
		f, err := NewHeadersFrame(endStream, fields...)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = struct {
			frame     *HeadersFrame
			fields    []HeaderField
			endStream bool
		}{f, fields, endStream}
	}
	add("response headers", false, GRPCResponseHeaders)
	add("trailers OK", true, GRPCTrailersOK)
	add("trailers-only UNAVAILABLE", true, append(append([]HeaderField(nil), GRPCResponseHeaders...),
		HeaderField{"grpc-status", "14"}, HeaderField{"grpc-message", "queue full, retry later"},
		HeaderField{"grpc-status-details-bin", "CAoSDnF1ZXVlIGZ1bGw"}))
	for _, path := range []string{
		tracev1.TraceService_Export_FullMethodName, metricsv1.MetricsService_Export_FullMethodName,
		logsv1.LogsService_Export_FullMethodName, otepv1.UnaryExporter_ExportTraces_FullMethodName,
		otepv1.UnaryExporter_ExportMetrics_FullMethodName, otepv1.UnaryExporter_ExportLogs_FullMethodName,
		otepv1.StreamExporter_ExportTraces_FullMethodName, otepv1.StreamExporter_ExportMetrics_FullMethodName,
		otepv1.StreamExporter_ExportLogs_FullMethodName,
	} {
		add("request "+path, false, GRPCRequestHeaders("http", "gateway.example:4317", path, "zstd", "otlpgate/1.0",
			HeaderField{"x-scope-orgid", "tenant-a"}, HeaderField{"authorization", "Bearer 0123456789"}))
	}
	add("request https, no encoding", false, GRPCRequestHeaders("https", "127.0.0.1:4317",
		tracev1.TraceService_Export_FullMethodName, "", "otlpgate/1.0"))
	return out
}

// x/net's Framer, with its HPACK decoder, reads every precomputed frame back as it was built,
// on any stream, many times over one connection, and its dynamic table stays empty.
func TestPrecomputedHeadersReadByXNet(t *testing.T) {
	frames := precomputed(t)
	var wire []byte
	type sent struct {
		name   string
		stream uint32
	}
	var order []sent
	stream := uint32(1)
	for round := 0; round < 3; round++ {
		for name, f := range frames {
			wire = f.frame.Append(wire, stream)
			order = append(order, sent{name, stream})
			stream += 2
		}
	}
	wire = frames["trailers OK"].frame.Append(wire, MaxWindow) // the largest stream id
	order = append(order, sent{"trailers OK", MaxWindow})

	var fields []hpack.HeaderField
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { fields = append(fields, f) })
	fr := http2.NewFramer(nil, bytes.NewReader(wire))
	for _, s := range order {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		h, ok := f.(*http2.HeadersFrame)
		if !ok || h.StreamID != s.stream || !h.HeadersEnded() || h.StreamEnded() != frames[s.name].endStream {
			t.Fatalf("%s: %T %+v", s.name, f, f.Header())
		}
		fields = fields[:0]
		if _, err := dec.Write(h.HeaderBlockFragment()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if err := dec.Close(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var got []HeaderField
		for _, f := range fields {
			if f.Sensitive {
				t.Fatalf("%s: %s marked never indexed", s.name, f.Name)
			}
			got = append(got, HeaderField{f.Name, f.Value})
		}
		if !reflect.DeepEqual(got, frames[s.name].fields) {
			t.Fatalf("%s on stream %d: x/net read\n%v\nwant\n%v", s.name, s.stream, got, frames[s.name].fields)
		}
	}
	// Nothing entered x/net's dynamic table: index 62 does not exist.
	if _, err := dec.DecodeFull([]byte{0xbe}); err == nil {
		t.Fatal("a precomputed block inserted into the peer's dynamic table")
	}
}

// The decoder here reads them too, and the frames parse with NextFrame.
func TestPrecomputedHeadersReadByDecoder(t *testing.T) {
	c := DefaultConfig()
	c.Keep = []string{":status", ":method", ":scheme", ":path", ":authority", "content-type", "te", "user-agent",
		"grpc-encoding", "grpc-status", "grpc-message", "grpc-status-details-bin", "x-scope-orgid", "authorization"}
	d := NewDecoder(c)
	for name, f := range precomputed(t) {
		b := f.frame.Append(nil, 7)
		fr, n, err := NextFrame(b, DefaultMaxFrameSize)
		if err != nil || n != len(b) || n != f.frame.Len() {
			t.Fatalf("%s: n=%d err=%v", name, n, err)
		}
		h, err := fr.Headers()
		if err != nil || h.StreamID != 7 || !h.EndHeaders || h.EndStream != f.endStream {
			t.Fatalf("%s: %+v %v", name, h, err)
		}
		fs, err := d.Decode(h.Fragment)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []HeaderField
		for _, f := range fs {
			got = append(got, HeaderField{f.Name, string(f.Value)})
		}
		if !reflect.DeepEqual(got, f.fields) {
			t.Fatalf("%s: %v, want %v", name, got, f.fields)
		}
		if d.TableSize() != 0 {
			t.Fatalf("%s: table size %d", name, d.TableSize())
		}
	}
}

func TestHeaderBlockUsesStaticTableAndHuffman(t *testing.T) {
	// :status 200 is index 8; content-type's name is index 31, its value Huffman-coded
	// ("application/grpc": 16 bytes, 11 coded).
	b := AppendHeaderBlock(nil, GRPCResponseHeaders...)
	want := append([]byte{0x88, 0x0f, 0x10, 0x80 | 11}, appendHuffman(nil, "application/grpc")...)
	if !bytes.Equal(b, want) {
		t.Fatalf("%x, want %x", b, want)
	}
	// A name not in the static table is a literal (Huffman-coded: 4 bytes for 5); a value
	// Huffman would lengthen is sent as it is.
	want = append(appendHuffman([]byte{0x00, 0x80 | 4}, "x-bin"), 0x02, 0x00, 0x01)
	if b := AppendHeaderBlock(nil, HeaderField{"x-bin", "\x00\x01"}); !bytes.Equal(b, want) {
		t.Fatalf("%x, want %x", b, want)
	}
}

func TestNewHeadersFrameRefusesAnOversizeBlock(t *testing.T) {
	if _, err := NewHeadersFrame(false, HeaderField{"x-big", string(make([]byte, DefaultMaxFrameSize))}); err == nil {
		t.Fatal("a block larger than one frame was accepted")
	}
}

func BenchmarkPrecomputedHeadersAppend(b *testing.B) {
	f, err := NewHeadersFrame(false, GRPCResponseHeaders...)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(f.Len()))
	stream := uint32(1)
	for b.Loop() {
		buf = f.Append(buf[:0], stream)
		stream += 2
	}
}
