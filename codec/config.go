package codec

import (
	"fmt"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Config tunes the compressors. The codec itself has nothing to tune but its buffer pool,
// which New takes.
type Config struct {
	// GzipLevel is the gzip level for sent messages: gzip.DefaultCompression (-1), or
	// gzip.BestSpeed (1) to gzip.BestCompression (9).
	GzipLevel int
	// ZstdLevel is the zstd encoder level for sent messages, 1 (fastest) to 4 (best), as in
	// klauspost/compress/zstd.EncoderLevel.
	ZstdLevel int
	// ZstdWindow is the window of the zstd encoder, a power of two in bytes. A pooled encoder
	// keeps about twice this much history, and a window beyond the largest message buys no
	// compression; 1 MiB matches gRPC's message sizes.
	ZstdWindow int
	// ZstdMaxWindow is the largest zstd window a received frame may ask for, in bytes. The
	// decoder allocates the window before it produces any output, so this caps the memory one
	// small malicious frame can claim. 8 MiB is what the zstd format asks every decoder to
	// support and what encoders at their default levels use.
	ZstdMaxWindow int
	// Budget, when set, is what the decompressors inflate into (see Budget); nil: no bound
	// but the receiver's maximum message size. InflateClaim is what one message past
	// FreeInflate takes from it: the largest message the receivers accept
	// (-grpc.max-recv-msg-size), which gRPC never lets a decompressor exceed.
	Budget       Budget
	InflateClaim int
}

// DefaultConfig returns the configuration RegisterCompressors uses. Safe for concurrent use.
func DefaultConfig() Config {
	return Config{
		GzipLevel:     gzip.DefaultCompression,
		ZstdLevel:     int(zstd.SpeedDefault),
		ZstdWindow:    1 << 20,
		ZstdMaxWindow: 8 << 20,
	}
}

// Validate reports the first setting out of its range. Safe for concurrent use.
func (c Config) Validate() error {
	if c.GzipLevel != gzip.DefaultCompression && (c.GzipLevel < gzip.BestSpeed || c.GzipLevel > gzip.BestCompression) {
		return fmt.Errorf("codec: gzip level %d outside -1 or 1..9", c.GzipLevel)
	}
	if c.ZstdLevel < int(zstd.SpeedFastest) || c.ZstdLevel > int(zstd.SpeedBestCompression) {
		return fmt.Errorf("codec: zstd level %d outside %d..%d", c.ZstdLevel, zstd.SpeedFastest, zstd.SpeedBestCompression)
	}
	if c.ZstdWindow < zstd.MinWindowSize || c.ZstdWindow > zstd.MaxWindowSize || c.ZstdWindow&(c.ZstdWindow-1) != 0 {
		return fmt.Errorf("codec: zstd window %d is not a power of two in %d..%d", c.ZstdWindow, zstd.MinWindowSize, zstd.MaxWindowSize)
	}
	if c.ZstdWindow > c.ZstdMaxWindow {
		return fmt.Errorf("codec: zstd window %d exceeds the largest window accepted, %d", c.ZstdWindow, c.ZstdMaxWindow)
	}
	if c.Budget != nil && c.InflateClaim <= 0 {
		return fmt.Errorf("codec: a decompression budget needs a positive claim, not %d", c.InflateClaim)
	}
	if c.ZstdMaxWindow < zstd.MinWindowSize || c.ZstdMaxWindow > zstd.MaxWindowSize {
		return fmt.Errorf("codec: zstd max window %d outside %d..%d", c.ZstdMaxWindow, zstd.MinWindowSize, zstd.MaxWindowSize)
	}
	return nil
}
