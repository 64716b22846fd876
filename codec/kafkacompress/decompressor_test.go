package kafkacompress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// capture is one real payload with the MetricsData it decompresses to.
type capture struct {
	name  string
	codec Codec
	in    []byte
	want  []byte
}

func codecFromName(t testing.TB, name string) Codec {
	for _, c := range []Codec{Zstd, LZ4, Gzip, Snappy, None} {
		if strings.HasSuffix(name, "-"+c.String()) {
			return c
		}
	}
	t.Fatalf("no codec in capture name %q", name)
	return 0
}

func loadCaptures(t testing.TB) []capture {
	t.Helper()
	files, err := filepath.Glob("testdata/*.payload")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	var cs []capture
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".payload")
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(f, ".payload") + ".metricsdata.pb")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, capture{name: name, codec: codecFromName(t, name), in: in, want: want})
	}
	return cs
}

func mustNew(t testing.TB, limit int) *Decompressor {
	t.Helper()
	d, err := New(limit)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCaptures(t *testing.T) {
	d := mustNew(t, 1<<20)
	seen := map[Codec]bool{}
	for _, c := range loadCaptures(t) {
		t.Run(c.name, func(t *testing.T) {
			got, err := d.Decompress(nil, c.codec, c.in)
			if err != nil {
				t.Fatalf("Decompress: %v", err)
			}
			if !bytes.Equal(got, c.want) {
				t.Fatalf("got %d bytes, want %d bytes of MetricsData", len(got), len(c.want))
			}
			// Twice, to exercise the decoders that came back from the pool.
			got, err = d.Decompress(got[:0], c.codec, c.in)
			if err != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("second Decompress: %v, %d bytes", err, len(got))
			}
		})
		seen[c.codec] = true
	}
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		if !seen[c] {
			t.Errorf("no capture for %v", c)
		}
	}
}

// payload returns n bytes that compress (repeated words with some noise).
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"org.apache.kafka.", "producer.", "node.", "request.", "latency.", "avg", "max", "\x00\x01"}
	var b []byte
	for len(b) < n {
		if r.IntN(8) == 0 {
			b = append(b, byte(r.Uint32()))
			continue
		}
		b = append(b, words[r.IntN(len(words))]...)
	}
	return b[:n]
}

func gzipOf(t testing.TB, members ...[]byte) []byte {
	var out bytes.Buffer
	for _, m := range members {
		w := gzip.NewWriter(&out)
		if _, err := w.Write(m); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// lz4Of writes each frame as Kafka clients do: 64 KiB blocks.
func lz4Of(t testing.TB, frames ...[]byte) []byte {
	var out bytes.Buffer
	for _, f := range frames {
		w := lz4.NewWriter(&out)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(f); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// zstdOf compresses each frame with EncodeAll, which writes the content size in the header.
func zstdOf(t testing.TB, frames ...[]byte) []byte {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out []byte
	for _, f := range frames {
		out = e.EncodeAll(f, out)
	}
	return out
}

// zstdStream compresses like a Java client: streaming, no pledged size, a 2 MiB window.
func zstdStream(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	e, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// xerialOf frames b like snappy-java's SnappyOutputStream: header, then int32-sized blocks.
func xerialOf(b []byte, chunk int) []byte {
	out := append([]byte(nil), xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(b) > 0 {
		n := min(chunk, len(b))
		block := snappy.Encode(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		b = b[n:]
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	d := mustNew(t, 1<<20)
	for _, n := range []int{0, 1, 1000, 70_000, 300_000} {
		a, b := payload(n, uint64(n)), payload(n/3+1, uint64(n)+7)
		both := append(append([]byte(nil), a...), b...)
		cases := []struct {
			name  string
			codec Codec
			in    []byte
			want  []byte
		}{
			{"none", None, a, a},
			{"gzip", Gzip, gzipOf(t, a), a},
			{"gzip two members", Gzip, gzipOf(t, a, b), both},
			{"snappy raw", Snappy, snappy.Encode(nil, a), a},
			{"snappy xerial", Snappy, xerialOf(a, 32<<10), a},
			{"lz4", LZ4, lz4Of(t, a), a},
			{"lz4 two frames", LZ4, lz4Of(t, a, b), both},
			{"zstd", Zstd, zstdOf(t, a), a},
			{"zstd two frames", Zstd, zstdOf(t, a, b), both},
			{"zstd stream", Zstd, zstdStream(t, a), a},
		}
		for _, c := range cases {
			prefix := []byte("keep")
			got, err := d.Decompress(append([]byte(nil), prefix...), c.codec, c.in)
			if err != nil {
				t.Fatalf("%s n=%d: %v", c.name, n, err)
			}
			if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], c.want) {
				t.Fatalf("%s n=%d: output differs (got %d bytes, want %d after prefix)", c.name, n, len(got)-len(prefix), len(c.want))
			}
		}
	}
}

func TestLimit(t *testing.T) {
	const limit = 64 << 10
	d := mustNew(t, limit)
	exact := payload(limit, 1)
	over := payload(limit+1, 1)
	bomb := make([]byte, 16<<20) // zeros: a tiny input that expands far past the limit
	encoders := []struct {
		name  string
		codec Codec
		enc   func([]byte) []byte
	}{
		{"none", None, func(b []byte) []byte { return b }},
		{"gzip", Gzip, func(b []byte) []byte { return gzipOf(t, b) }},
		{"snappy raw", Snappy, func(b []byte) []byte { return snappy.Encode(nil, b) }},
		{"snappy xerial", Snappy, func(b []byte) []byte { return xerialOf(b, 32<<10) }},
		{"lz4", LZ4, func(b []byte) []byte { return lz4Of(t, b) }},
		{"zstd", Zstd, func(b []byte) []byte { return zstdOf(t, b) }},
		{"zstd stream", Zstd, func(b []byte) []byte { return zstdStream(t, b) }},
		{"zstd frames", Zstd, func(b []byte) []byte { return zstdOf(t, b[:len(b)/2], b[len(b)/2:]) }},
	}
	for _, e := range encoders {
		t.Run(e.name, func(t *testing.T) {
			got, err := d.Decompress(nil, e.codec, e.enc(exact))
			if err != nil || !bytes.Equal(got, exact) {
				t.Fatalf("exactly the limit: err %v, %d bytes", err, len(got))
			}
			if _, err := d.Decompress(nil, e.codec, e.enc(over)); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("one byte over: err %v, want ErrTooLarge", err)
			}
			if e.codec == None {
				return
			}
			got, err = d.Decompress(nil, e.codec, e.enc(bomb))
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("bomb: err %v, want ErrTooLarge", err)
			}
			// Decoding stopped near the cap instead of inflating 16 MiB: at most one zstd
			// block (128 KiB) past it, and the append may have doubled that.
			if cap(got) > 2*(limit+128<<10) {
				t.Fatalf("bomb: output grew to cap %d, limit %d", cap(got), limit)
			}
		})
	}
}

func TestCorrupt(t *testing.T) {
	d := mustNew(t, 1<<20)
	for _, c := range loadCaptures(t) {
		if c.codec == None {
			continue
		}
		for _, cut := range []int{1, len(c.in) / 2, len(c.in) - 1} {
			_, err := d.Decompress(nil, c.codec, c.in[:cut])
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s cut at %d: err %v, want ErrCorrupt", c.name, cut, err)
			}
		}
	}
	for _, codec := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		if _, err := d.Decompress(nil, codec, []byte("definitely not compressed data")); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v garbage: err %v, want ErrCorrupt", codec, err)
		}
	}
	// An xerial chunk that claims more bytes than follow.
	bad := xerialOf([]byte("hello hello hello"), 1024)
	binary.BigEndian.PutUint32(bad[16:], 1<<30)
	if _, err := d.Decompress(nil, Snappy, bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("xerial oversized chunk: err %v, want ErrCorrupt", err)
	}
}

func TestUnsupported(t *testing.T) {
	d := mustNew(t, 1024)
	for _, c := range []Codec{-1, 5, 127} {
		if c.Supported() {
			t.Errorf("%d reported as supported", c)
		}
		if _, err := d.Decompress(nil, c, []byte{1}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("codec %d: err %v, want ErrUnsupported", c, err)
		}
	}
	if _, err := New(0); err == nil {
		t.Error("New(0) accepted")
	}
}

// stuckReader returns (0, nil) forever.
type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

func TestReadCappedStalls(t *testing.T) {
	probe := make([]byte, 1)
	if _, err := readCapped(nil, stuckReader{}, 100, probe); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	got, err := readCapped(nil, io.LimitReader(bytes.NewReader(make([]byte, 10)), 10), 10, probe)
	if err != nil || len(got) != 10 || cap(got) != 10 {
		t.Fatalf("exact: %v, %d bytes, cap %d", err, len(got), cap(got))
	}
	got, err = readCapped(make([]byte, 0, 10), bytes.NewReader(make([]byte, 11)), 10, probe)
	if !errors.Is(err, ErrTooLarge) || len(got) != 10 || cap(got) != 10 {
		t.Fatalf("one over: %v, %d bytes, cap %d: dst grew past the limit", err, len(got), cap(got))
	}
}
