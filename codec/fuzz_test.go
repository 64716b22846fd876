package codec

import (
	"bytes"
	"io"
	"testing"

	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// split cuts b into two mem buffers at cut (clamped), as a message straddling two frames.
func split(b []byte, cut uint16) mem.BufferSlice {
	at := min(int(cut), len(b))
	return mem.BufferSlice{mem.SliceBuffer(b[:at]), mem.SliceBuffer(b[at:])}
}

func fuzzSeeds(f *testing.F) {
	gen := otlpgen.New(11)
	for _, sh := range []otlpgen.Shape{{Spans: 1, Attrs: 2}, {Spans: 3, Attrs: 4}, otlpgen.Small} {
		enc, _ := gen.Spans(sh).MarshalVT()
		f.Add(enc, uint16(len(enc)/3))
	}
	otep, _ := (&otepv1.TraceExportRequest{Id: 9, ResourceSpans: gen.Spans(otlpgen.Shape{Spans: 2, Attrs: 3}).ResourceSpans}).MarshalVT()
	f.Add(otep, uint16(1))
	f.Add([]byte{}, uint16(0))
}

// FuzzUnmarshalTraces feeds arbitrary bytes to the typed path, whole and split across two
// buffers. Both must agree, never panic, and whatever decodes must survive a round trip through
// the codec.
func FuzzUnmarshalTraces(f *testing.F) {
	fuzzSeeds(f)
	c := New(MemPool{})
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		whole := &coltracev1.ExportTraceServiceRequest{}
		errWhole := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, whole)
		pieces := coltracev1.ExportTraceServiceRequestFromVTPool()
		defer pieces.ReturnToVTPool()
		errPieces := c.Unmarshal(split(data, cut), pieces)
		if (errWhole == nil) != (errPieces == nil) {
			t.Fatalf("whole: %v, split at %d: %v", errWhole, cut, errPieces)
		}
		if errWhole != nil {
			return
		}
		if !whole.EqualVT(pieces) {
			t.Fatal("whole and split decodes differ")
		}
		out, err := c.Marshal(whole)
		if err != nil {
			t.Fatal(err)
		}
		again := &coltracev1.ExportTraceServiceRequest{}
		err = c.Unmarshal(out, again)
		out.Free()
		if err != nil || !again.EqualVT(whole) {
			t.Fatalf("re-encoded message does not decode to itself: %v", err)
		}
	})
}

// FuzzRawReceive checks that a Raw holds exactly the bytes received, however they are split,
// and that sending it back yields them again.
func FuzzRawReceive(f *testing.F) {
	fuzzSeeds(f)
	c := New(MemPool{})
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		var r Raw
		defer r.Release()
		for _, in := range []mem.BufferSlice{{mem.SliceBuffer(data)}, split(data, cut)} {
			if err := c.Unmarshal(in, &r); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Bytes(), data) {
				t.Fatal("Raw holds different bytes")
			}
			out, err := c.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Materialize(), data) {
				t.Fatal("Raw sends different bytes")
			}
			out.Free()
		}
	})
}

// FuzzDecompress feeds arbitrary bytes to each decompressor (which must fail cleanly, with a
// bounded output) and checks that the same bytes survive a compress/decompress round trip.
func FuzzDecompress(f *testing.F) {
	cs := compressors(f)
	names := []string{Gzip, Zstd, Snappy}
	enc, _ := otlpgen.New(12).Spans(otlpgen.Shape{Spans: 5, Attrs: 4}).MarshalVT()
	for i, name := range names {
		z, err := tryCompress(cs[name], enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(z, uint8(i))
		f.Add(z[:len(z)/2], uint8(i))
	}
	const limit = 4 << 20 // gRPC's default receive limit, as it applies it
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		c := cs[names[int(which)%len(names)]]
		if r, err := c.Decompress(bytes.NewReader(data)); err == nil {
			io.Copy(io.Discard, io.LimitReader(r, limit+1))
			r.(io.Closer).Close()
		}
		z, err := tryCompress(c, data)
		if err != nil {
			t.Fatal(err)
		}
		if passesThrough(c.Name(), data) {
			// Never a protobuf message: a pass-through batch, sent as it is (passthrough.go).
			if !bytes.Equal(z, data) {
				t.Fatalf("%s changed a message that begins with its pass-through magic", c.Name())
			}
			return
		}
		got, err := decompress(c, z)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s round trip: %v", c.Name(), err)
		}
	})
}

// passesThrough reports whether the writer of the named compressor sends data as it is.
func passesThrough(name string, data []byte) bool {
	return len(data) > 0 && (name == Gzip && data[0] == gzipFirst || name == Zstd && data[0] == zstdFirst)
}

// FuzzWireDecompressor feeds arbitrary bytes, as one compressed message, to the gzip and zstd
// WireDecompressors: each either fails, refuses past its limit (a message longer than the
// limit, with no trailer), or returns exactly what the registered decompressor inflates the
// bytes to, with the bytes themselves, unchanged, as the Raw's wire.
func FuzzWireDecompressor(f *testing.F) {
	cs := compressors(f)
	names := []string{Gzip, Zstd}
	enc, _ := otlpgen.New(13).Spans(otlpgen.Shape{Spans: 5, Attrs: 4}).MarshalVT()
	for i, name := range names {
		z, err := tryCompress(cs[name], enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(z, uint8(i))
		f.Add(z[:len(z)-3], uint8(i))
		f.Add(append(append([]byte(nil), z...), z...), uint8(i))
	}
	const limit = 64 << 10
	ds := map[string]*WireDecompressor{}
	for _, name := range names {
		d, err := NewWireDecompressor(name, limit)
		if err != nil {
			f.Fatal(err)
		}
		ds[name] = d
	}
	c := New(MemPool{})
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		name := names[int(which)%len(names)]
		var r msgReader
		r.reset(data)
		out, err := ds[name].Do(&r)
		if err != nil {
			return
		}
		if len(out) > limit {
			if _, ok := findWireIn(out); ok || len(out) != limit+1 {
				t.Fatalf("a message past the limit came back as %d bytes, trailer found %v", len(out), ok)
			}
			return
		}
		want, err := decompress(cs[name], data)
		if err != nil || !bytes.Equal(want, out) {
			t.Fatalf("%s: Do returned %d bytes, the decompressor %d (%v)", name, len(out), len(want), err)
		}
		var raw Raw
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(out)}, &raw); err != nil {
			t.Fatal(err)
		}
		wire, enc := raw.Wire()
		if enc != name || !bytes.Equal(wire, data) || !bytes.Equal(raw.Bytes(), want) {
			t.Fatalf("%s: the Raw carries %q wire of %d bytes (sent %d), plain %d", name, enc, len(wire), len(data), raw.Len())
		}
		raw.Release()
	})
}
