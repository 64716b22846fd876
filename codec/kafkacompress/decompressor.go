package kafkacompress

import (
	"errors"
	"io"
	"sync"
)

// Codec is a Kafka compression type as it appears on the wire (the attributes bits of a record
// batch, the CompressionType field of PushTelemetry).
type Codec int8

const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// String returns the codec's lower-case Kafka name.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return "unknown"
}

// Supported reports whether Decompress understands c.
func (c Codec) Supported() bool { return c >= None && c <= Zstd }

var (
	// ErrUnsupported is returned for a codec id Kafka does not define.
	ErrUnsupported = errors.New("kafkacompress: unsupported compression type")
	// ErrTooLarge is returned once the output would exceed the Decompressor's limit. Decoding
	// stops there: no more than the limit (plus at most one zstd block of 128 KiB) is written.
	// It is also returned, before decoding, for an lz4 frame that declares blocks larger than
	// the smallest lz4 block size holding the limit: the decoder would reserve a buffer of
	// that size (up to 4 MiB) for a frame of a few bytes. Kafka clients write 64 KiB blocks.
	ErrTooLarge = errors.New("kafkacompress: decompressed size exceeds limit")
	// ErrCorrupt is returned for input the codec cannot decode.
	ErrCorrupt = errors.New("kafkacompress: corrupt compressed data")
)

// MinLimit and MaxLimit bound the output limit given to New.
const (
	MinLimit = 1
	MaxLimit = 1 << 30
)

// Decompressor decodes Kafka payloads with pooled decoders, never producing more than Limit
// bytes of output per call.
//
// Invariants:
//  1. Every decoder taken from a pool is reset before use and put back on every return path.
//  2. Streaming decoders read into the caller's dst only; their own buffers stay in their pools.
type Decompressor struct {
	limit int

	zstd sync.Pool // *zstd.Decoder, concurrency 1
	gzip sync.Pool // *gzipDecoder
	lz4  sync.Pool // *lz4Decoder
}

// New returns a Decompressor whose output is capped at limit bytes per call. Safe for
// concurrent use.
func New(limit int) (*Decompressor, error) {
	if limit < MinLimit || limit > MaxLimit {
		return nil, errors.New("kafkacompress: limit out of range")
	}
	return &Decompressor{limit: limit}, nil
}

// Limit returns the output cap given to New. Safe for concurrent use.
func (d *Decompressor) Limit() int { return d.limit }

// Decompress appends the decoded form of src to dst and returns the extended slice. The bytes
// appended never exceed Limit; dst grows only as far as the output requires. On error the
// returned slice holds dst's original contents plus whatever was decoded before the failure;
// callers treat it as garbage but may keep its capacity.
// Safe for concurrent use.
func (d *Decompressor) Decompress(dst []byte, c Codec, src []byte) ([]byte, error) {
	switch c {
	case None:
		if len(src) > d.limit {
			return dst, ErrTooLarge
		}
		return append(dst, src...), nil
	case Gzip:
		return d.gunzip(dst, src)
	case Snappy:
		return d.unsnappy(dst, src)
	case LZ4:
		return d.unlz4(dst, src)
	case Zstd:
		return d.unzstd(dst, src)
	}
	return dst, ErrUnsupported
}

// readCapped drains r into dst, appending at most limit bytes. Once limit bytes are in, it
// reads into probe (one byte the caller owns) to tell "exactly limit" from "more than limit",
// so dst never grows past the limit.
func readCapped(dst []byte, r io.Reader, limit int, probe []byte) ([]byte, error) {
	end := len(dst) + limit
	stalled := 0
	for {
		buf := probe[:1]
		full := len(dst) == end
		if !full {
			if len(dst) == cap(dst) {
				dst = growCapped(dst, end)
			}
			buf = dst[len(dst):min(cap(dst), end)]
		}
		n, err := r.Read(buf)
		if full && n > 0 {
			return dst, ErrTooLarge
		}
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, ErrCorrupt
		}
		// io.Reader allows (0, nil); a decoder stuck there would spin forever.
		if n == 0 {
			if stalled++; stalled > maxStalledReads {
				return dst, ErrCorrupt
			}
		} else {
			stalled = 0
		}
	}
}

const maxStalledReads = 64

// growCapped doubles dst's capacity (at least 4 KiB more), never beyond end.
func growCapped(dst []byte, end int) []byte {
	want := max(2*cap(dst), cap(dst)+4096)
	want = min(want, end)
	if want <= cap(dst) {
		return dst
	}
	n := make([]byte, len(dst), want)
	copy(n, dst)
	return n
}
