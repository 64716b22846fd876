package codec

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc/encoding"
)

// Compressor names, as they appear in the grpc-encoding header.
const (
	Gzip   = "gzip"
	Zstd   = "zstd"
	Snappy = "snappy"
)

var decompressErrors = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "otlpgate_codec_decompress_errors_total",
	Help: "Received gRPC messages whose compressed body was corrupt, by grpc-encoding.",
}, []string{"encoding"})

// RegisterCompressors registers gzip, zstd and snappy with DefaultConfig. Like every gRPC
// registration it must run before any server or client exists, on one goroutine.
func RegisterCompressors() {
	if err := RegisterCompressorsWith(DefaultConfig()); err != nil {
		panic("BUG: codec: default compressor configuration is invalid: " + err.Error())
	}
}

// RegisterCompressorsWith registers gzip, zstd and snappy configured by cfg, replacing any
// compressor registered under those names. Same rules as RegisterCompressors.
func RegisterCompressorsWith(cfg Config) error {
	cs, err := Compressors(cfg)
	if err != nil {
		return err
	}
	for _, c := range cs {
		encoding.RegisterCompressor(c)
	}
	return nil
}

// Compressors returns the gzip, zstd and snappy compressors configured by cfg, without
// registering them. Each is safe for concurrent use.
func Compressors(cfg Config) ([]encoding.Compressor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return []encoding.Compressor{
		newGzipCompressor(cfg.GzipLevel, cfg.Budget, cfg.InflateClaim),
		newZstdCompressor(cfg),
		newSnappyCompressor(cfg.Budget, cfg.InflateClaim),
	}, nil
}

// sink is the io.Writer a pooled encoder is bound to for its whole life. Binding the encoder
// to a sink and pointing the sink at gRPC's writer for one message means Close can drop that
// writer (and the message buffers behind it) without resetting the encoder a second time.
type sink struct{ w io.Writer }

func (s *sink) Write(p []byte) (int, error) { return s.w.Write(p) }

// source is sink's counterpart for pooled decoders; it also counts a corrupt stream once.
type source struct{ r io.Reader }

func (s *source) Read(p []byte) (int, error) { return s.r.Read(p) }

// countCorrupt counts err against the encoding unless it is the clean end of the stream.
func countCorrupt(c prometheus.Counter, err error) {
	if err != nil && err != io.EOF {
		c.Inc()
	}
}
