package kafkacompress

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/klauspost/compress/snappy"
)

// xerialMagic starts the framing written by snappy-java's SnappyOutputStream, which Java Kafka
// clients use; librdkafka sends a raw snappy block instead. No valid raw block starts with these
// bytes: after the two-byte length varint, 'N' (0x4e) is a copy tag, and a block cannot open
// with a copy. So testing for the magic first never misreads a raw block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// xerialHeaderLen is the magic plus the version and minimum compatible version (int32 each).
const xerialHeaderLen = 16

// unsnappy decodes a raw snappy block or an xerial-framed run of blocks.
func (d *Decompressor) unsnappy(dst, src []byte) ([]byte, error) {
	if len(src) >= len(xerialMagic) && bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		return d.unxerial(dst, src)
	}
	start := len(dst)
	dst, err := d.snappyBlock(dst, src, d.limit)
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// snappyBlock appends one decoded raw block, checking its announced length against room before
// decoding a single byte: a block cannot grow past its header's length.
func (d *Decompressor) snappyBlock(dst, block []byte, room int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, ErrCorrupt
	}
	if n > room {
		return dst, ErrTooLarge
	}
	dst = slices.Grow(dst, n)
	out, err := snappy.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil || len(out) != n {
		return dst, ErrCorrupt
	}
	return dst[:len(dst)+n], nil
}

// unxerial decodes the xerial framing: the 16-byte header, then chunks of a big-endian int32
// length followed by that many bytes of raw snappy block.
func (d *Decompressor) unxerial(dst, src []byte) ([]byte, error) {
	start := len(dst)
	if len(src) < xerialHeaderLen {
		return dst, ErrCorrupt
	}
	src = src[xerialHeaderLen:]
	for len(src) > 0 {
		if len(src) < 4 {
			return dst[:start], ErrCorrupt
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return dst[:start], ErrCorrupt
		}
		var err error
		dst, err = d.snappyBlock(dst, src[:n], d.limit-(len(dst)-start))
		if err != nil {
			return dst[:start], err
		}
		src = src[n:]
	}
	return dst, nil
}
