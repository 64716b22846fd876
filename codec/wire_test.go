package codec

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/ziptest"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// msgReader reads a byte slice and tells what remains, as gRPC's *mem.Reader does; reset
// makes it read b again without an allocation.
type msgReader struct{ b, rest []byte }

func (r *msgReader) reset(b []byte) { r.b, r.rest = b, b }
func (r *msgReader) Remaining() int { return len(r.rest) }
func (r *msgReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func newWire(t testing.TB, name string, max int) *WireDecompressor {
	t.Helper()
	d, err := NewWireDecompressor(name, max)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A message a WireDecompressor produced reaches a Raw as its decompressed bytes with the bytes
// it arrived as beside them, for both encodings and for sizes that fit the first buffer, need
// it to grow, and announce a wrong size (two gzip members: the trailer tells only the last
// one's). A typed message decodes from the plain bytes. After release no trailer is left in the
// buffer.
func TestWireDecompressorKeepsWire(t *testing.T) {
	c := New(MemPool{})
	g := otlpgen.New(1)
	small, _ := g.Spans(otlpgen.Shape{Spans: 3, Attrs: 2}).MarshalVT()
	large, _ := g.Spans(otlpgen.Shape{Spans: 2000, Attrs: 6}).MarshalVT()
	for _, tc := range []struct {
		name, enc   string
		plain, wire []byte
	}{
		{"gzip/small", Gzip, small, ziptest.Gzip(t, small)},
		{"gzip/large", Gzip, large, ziptest.Gzip(t, large)},
		{"gzip/two-members", Gzip, append(append([]byte(nil), large...), small...), append(ziptest.Gzip(t, large), ziptest.Gzip(t, small)...)},
		{"zstd/small", Zstd, small, ziptest.Zstd(t, nil, small)},
		{"zstd/large", Zstd, large, ziptest.Zstd(t, nil, large)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newWire(t, tc.enc, 64<<20)
			var r msgReader
			r.reset(tc.wire)
			out, err := d.Do(&r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, tc.plain) {
				t.Fatalf("Do returned %d bytes, want the %d plain bytes", len(out), len(tc.plain))
			}
			var raw Raw
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(out)}, &raw); err != nil {
				t.Fatal(err)
			}
			wire, enc := raw.Wire()
			if enc != tc.enc || !bytes.Equal(wire, tc.wire) || !bytes.Equal(raw.Bytes(), tc.plain) {
				t.Fatalf("Raw: %q wire of %d bytes, plain %d; want %q, %d, %d", enc, len(wire), raw.Len(), tc.enc, len(tc.wire), len(tc.plain))
			}
			raw.Release()
			if _, ok := findWireIn(out); ok {
				t.Fatal("the released buffer still holds a trailer")
			}

			r.reset(tc.wire)
			out, err = d.Do(&r)
			if err != nil {
				t.Fatal(err)
			}
			var req coltracev1.ExportTraceServiceRequest
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(out)}, &req); err != nil {
				t.Fatal(err)
			}
			if got, _ := req.MarshalVT(); !bytes.HasPrefix(tc.plain, got) {
				t.Fatal("the typed message does not hold the plain request")
			}
			if _, ok := findWireIn(out); ok {
				t.Fatal("the buffer a typed message was decoded from still holds a trailer")
			}
		})
	}
}

// Only a trailer this process wrote, for the message it ends, is taken: a client's uncompressed
// message whose spare capacity holds a forged trailer (wrong key, or the right layout for
// another length) is an ordinary message.
func TestWireTrailerNotForged(t *testing.T) {
	d := newWire(t, Gzip, 1<<20)
	plain := []byte("\x0a\x02\x08\x01")
	var r msgReader
	r.reset(ziptest.Gzip(t, plain))
	out, err := d.Do(&r)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := findWireIn(out)
	if !ok {
		t.Fatal("the trailer Do wrote is not found")
	}
	full := out[:cap(out)]
	f := append([]byte(nil), full...)
	f[len(out)+trailerKey] ^= 1
	forged := f[:len(out)]
	if _, ok := findWireIn(forged); ok {
		t.Fatal("a trailer with another key was taken")
	}
	shorter := append([]byte(nil), full...)[:len(out)-1]
	if _, ok := findWireIn(shorter); ok {
		t.Fatal("a trailer for another length was taken")
	}
	var raw Raw
	New(MemPool{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(forged)}, &raw)
	if wire, _ := raw.Wire(); wire != nil || !bytes.Equal(raw.Bytes(), plain) {
		t.Fatal("a forged message carries wire bytes")
	}
	raw.Release()
	w.release()
}

// A message that inflates past the limit comes back longer than the limit, which gRPC refuses
// with RESOURCE_EXHAUSTED, with no trailer; a corrupt one is an error.
func TestWireDecompressorLimits(t *testing.T) {
	d := newWire(t, Gzip, 64<<10)
	var r msgReader
	r.reset(ziptest.Gzip(t, make([]byte, 200<<10)))
	out, err := d.Do(&r)
	if err != nil || len(out) != 64<<10+1 {
		t.Fatalf("Do: %d bytes, %v; want the limit plus one", len(out), err)
	}
	if _, ok := findWireIn(out); ok {
		t.Fatal("a refused message carries a trailer")
	}
	wire := ziptest.Gzip(t, []byte("hello"))
	wire[len(wire)-6] ^= 0xff // the CRC
	r.reset(wire)
	if _, err := d.Do(&r); err == nil {
		t.Fatal("a corrupt message was decompressed")
	}
	if _, err := NewWireDecompressor("snappy", 1<<20); !errors.Is(err, ErrWireEncoding) {
		t.Fatalf("snappy: %v, want ErrWireEncoding", err)
	}
}
