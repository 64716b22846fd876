package codec

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/encoding"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

func compressors(t testing.TB) map[string]encoding.Compressor {
	t.Helper()
	cs, err := Compressors(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]encoding.Compressor, len(cs))
	for _, c := range cs {
		m[c.Name()] = c
	}
	if len(m) != 3 || m[Gzip] == nil || m[Zstd] == nil || m[Snappy] == nil {
		t.Fatalf("compressors %v", m)
	}
	return m
}

func compress(t testing.TB, c encoding.Compressor, in []byte) []byte {
	t.Helper()
	out, err := tryCompress(c, in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryCompress(c encoding.Compressor, in []byte) ([]byte, error) {
	var out bytes.Buffer
	w, err := c.Compress(&out)
	if err != nil {
		return nil, err
	}
	// Two writes, as gRPC makes one per buffer of the message.
	half := len(in) / 2
	if _, err := w.Write(in[:half]); err != nil {
		return nil, err
	}
	if _, err := w.Write(in[half:]); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func decompress(c encoding.Compressor, in []byte) ([]byte, error) {
	r, err := c.Decompress(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(r)
	r.(io.Closer).Close()
	return out, err
}

func inputs() map[string][]byte {
	enc, _ := otlpgen.New(9).Spans(otlpgen.Large).MarshalVT()
	return map[string][]byte{
		"empty":     {},
		"one byte":  {42},
		"small":     seq(100),
		"64KiB+1":   seq(64<<10 + 1), // just past a snappy chunk
		"large":     enc,
		"zeros 2MB": make([]byte, 2<<20),
	}
}

func TestCompressorsRoundTrip(t *testing.T) {
	for name, c := range compressors(t) {
		for in, data := range inputs() {
			// Twice: the second round uses the pooled writer and reader of the first.
			for round := range 2 {
				z := compress(t, c, data)
				got, err := decompress(c, z)
				if err != nil {
					t.Fatalf("%s/%s round %d: %v", name, in, round, err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("%s/%s round %d: %d bytes back, want %d", name, in, round, len(got), len(data))
				}
			}
		}
	}
}

// Pooled state must not leak between messages compressed at the same time.
func TestCompressorsConcurrent(t *testing.T) {
	cs := compressors(t)
	msgs := make([][]byte, 8)
	gen := otlpgen.New(10)
	for i := range msgs {
		msgs[i], _ = gen.Spans(otlpgen.Small).MarshalVT()
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(cs)*len(msgs))
	for name, c := range cs {
		for _, m := range msgs {
			wg.Go(func() {
				for range 20 {
					z, err := tryCompress(c, m)
					if err != nil {
						errs <- name
						return
					}
					got, err := decompress(c, z)
					if err != nil || !bytes.Equal(got, m) {
						errs <- name
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: a concurrent round trip came back wrong", name)
	}
}

func TestGzipInterop(t *testing.T) {
	c := compressors(t)[Gzip]
	data := inputs()["large"]

	r, err := stdgzip.NewReader(bytes.NewReader(compress(t, c, data)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the standard library cannot read our gzip: %v", err)
	}

	var std bytes.Buffer
	w := stdgzip.NewWriter(&std)
	w.Write(data)
	w.Close()
	got, err = decompress(c, std.Bytes())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("we cannot read the standard library's gzip: %v", err)
	}
}

// The framing format starts with the stream identifier chunk and carries checksummed chunks
// of at most 64 KiB uncompressed.
func TestSnappyFraming(t *testing.T) {
	c := compressors(t)[Snappy]
	z := compress(t, c, inputs()["large"])
	const streamID = "\xff\x06\x00\x00sNaPpY"
	if !bytes.HasPrefix(z, []byte(streamID)) {
		t.Fatalf("snappy stream starts %q, want the stream identifier", z[:min(len(z), 10)])
	}
	// Walk the chunks: type byte, 3-byte little-endian length.
	chunks := 0
	for rest := z[len(streamID):]; len(rest) > 0; chunks++ {
		if len(rest) < 4 {
			t.Fatal("truncated chunk header")
		}
		typ, n := rest[0], int(rest[1])|int(rest[2])<<8|int(rest[3])<<16
		if typ != 0x00 && typ != 0x01 {
			t.Fatalf("chunk %d has type %#x, want compressed (0) or uncompressed (1)", chunks, typ)
		}
		if n > 4+65536+65536/6+32 || len(rest) < 4+n {
			t.Fatalf("chunk %d length %d", chunks, n)
		}
		rest = rest[4+n:]
	}
	if want := (len(inputs()["large"]) + 65535) / 65536; chunks < want {
		t.Fatalf("%d chunks for %d bytes, want at least %d", chunks, len(inputs()["large"]), want)
	}
}

// A frame that declares a window above the configured maximum is refused, and counted.
func TestZstdWindowLimit(t *testing.T) {
	c := compressors(t)[Zstd]
	var z bytes.Buffer
	w, err := zstd.NewWriter(&z, zstd.WithWindowSize(32<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(seq(1 << 20))
	w.Close()
	before := testutil.ToFloat64(decompressErrors.WithLabelValues(Zstd))
	if _, err := decompress(c, z.Bytes()); !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		t.Fatalf("32 MiB window: %v, want ErrWindowSizeExceeded", err)
	}
	if got := testutil.ToFloat64(decompressErrors.WithLabelValues(Zstd)) - before; got != 1 {
		t.Fatalf("decompress errors grew by %v, want 1", got)
	}
}

func TestCorruptInputCounted(t *testing.T) {
	cs := compressors(t)
	data := inputs()["large"]
	for name, c := range cs {
		good := compress(t, c, data)
		corrupt := map[string][]byte{
			"garbage":   seq(300),
			"truncated": good[:len(good)/2],
			"flipped":   flip(good),
		}
		for kind, in := range corrupt {
			counter := decompressErrors.WithLabelValues(name)
			before := testutil.ToFloat64(counter)
			if _, err := decompress(c, in); err == nil {
				t.Fatalf("%s/%s: decoded without error", name, kind)
			}
			if got := testutil.ToFloat64(counter) - before; got != 1 {
				t.Fatalf("%s/%s: decompress errors grew by %v, want 1", name, kind, got)
			}
			// The pooled reader that failed must serve the next message correctly.
			got, err := decompress(c, good)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: after %s input, a good message fails: %v", name, kind, err)
			}
		}
	}
}

// flip returns b with a byte in the middle changed, which every format's checksum catches.
func flip(b []byte) []byte {
	f := bytes.Clone(b)
	f[len(f)/2] ^= 0x55
	return f
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.GzipLevel = 0 },
		func(c *Config) { c.GzipLevel = 10 },
		func(c *Config) { c.ZstdLevel = 0 },
		func(c *Config) { c.ZstdLevel = 5 },
		func(c *Config) { c.ZstdWindow = 3 << 20 },
		func(c *Config) { c.ZstdWindow = 512 },
		func(c *Config) { c.ZstdWindow = 16 << 20 }, // above ZstdMaxWindow
		func(c *Config) { c.ZstdMaxWindow = 100 },
	}
	for i, mutate := range bad {
		cfg := DefaultConfig()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, cfg)
		}
		if err := RegisterCompressorsWith(cfg); err == nil {
			t.Errorf("case %d: registered an invalid configuration", i)
		}
	}
	for _, level := range []int{-1, 1, 9} {
		cfg := DefaultConfig()
		cfg.GzipLevel = level
		if err := cfg.Validate(); err != nil {
			t.Errorf("gzip level %d: %v", level, err)
		}
	}
}

func TestRegistered(t *testing.T) {
	for _, name := range []string{Gzip, Zstd, Snappy} {
		c := encoding.GetCompressor(name)
		if c == nil {
			t.Fatalf("%s not registered", name)
		}
		switch c.(type) {
		case *gzipCompressor, *zstdCompressor, *snappyCompressor:
		default:
			t.Fatalf("%s is %T, not ours", name, c)
		}
	}
}
