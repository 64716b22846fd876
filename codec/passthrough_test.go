package codec

import (
	"bytes"
	"testing"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/ziptest"
)

// The gzip and zstd writers send a pass-through batch (gzip members; zstd frames behind an
// empty skippable frame) as it is and compress a protobuf message, a pooled writer deciding
// afresh for each message: a batch, a message, a batch, a message, each comes out right.
func TestCompressPassesBatchesThrough(t *testing.T) {
	cs := compressors(t)
	msg, _ := otlpgen.New(5).Spans(otlpgen.Shape{Spans: 5, Attrs: 4}).MarshalVT()
	twice := append(append([]byte(nil), msg...), msg...)
	for name, batch := range passBatches(t, msg, 2) { // two requests each
		c := cs[name]
		for i := range 2 {
			out, err := tryCompress(c, batch)
			if err != nil || !bytes.Equal(out, batch) {
				t.Fatalf("%s round %d: a batch came out changed (%v)", name, i, err)
			}
			if got, err := decompress(c, out); err != nil || !bytes.Equal(got, twice) {
				t.Fatalf("%s round %d: the batch decompresses to %d bytes (%v), want its two requests", name, i, len(got), err)
			}
			out, err = tryCompress(c, msg)
			if err != nil || bytes.Equal(out, msg) {
				t.Fatalf("%s round %d: a protobuf message was not compressed (%v)", name, i, err)
			}
			if got, err := decompress(c, out); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("%s round %d: message round trip: %v", name, i, err)
			}
		}
	}
}

// A message handed over in buffers of which the first is empty (gRPC writes one buffer at a
// time) is decided on its first byte all the same: a pass-through batch comes out unchanged,
// with no gzip header in front of it, and a protobuf message compresses and round-trips.
// (Found by FuzzDecompress: a gzip batch so written was sent behind a stray gzip header.)
func TestCompressEmptyFirstWrite(t *testing.T) {
	cs := compressors(t)
	msg, _ := otlpgen.New(6).Spans(otlpgen.Shape{Spans: 3, Attrs: 2}).MarshalVT()
	write := func(name string, parts ...[]byte) []byte {
		var out bytes.Buffer
		cw, err := cs[name].Compress(&out)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if _, err := cw.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := cw.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	for name, batch := range passBatches(t, msg, 1) {
		if out := write(name, nil, batch[:1], nil, batch[1:]); !bytes.Equal(out, batch) {
			t.Errorf("%s: a batch after an empty write came out as %d bytes, want it unchanged (%d)", name, len(out), len(batch))
		}
		out := write(name, []byte{}, msg)
		if got, err := decompress(cs[name], out); err != nil || !bytes.Equal(got, msg) {
			t.Errorf("%s: a message after an empty write: %v", name, err)
		}
		if got, err := decompress(cs[name], write(name, []byte{})); err != nil || len(got) != 0 {
			t.Errorf("%s: an empty message decompresses to %d bytes (%v)", name, len(got), err)
		}
	}
}

// passBatches returns the pass-through batches of n requests msg, by encoding: n gzip members,
// and the empty skippable frame followed by n zstd frames.
func passBatches(t *testing.T, msg []byte, n int) map[string][]byte {
	t.Helper()
	var gz []byte
	zs := []byte{0x57, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}
	for range n {
		gz = append(gz, ziptest.Gzip(t, msg)...)
		zs = ziptest.Zstd(t, zs, msg)
	}
	return map[string][]byte{Gzip: gz, Zstd: zs}
}
