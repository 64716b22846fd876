package fastpath

import (
	"encoding/binary"
	"math/bits"

	"google.golang.org/protobuf/encoding/protowire"
)

// The per-message walkers of DepthResource and DepthFull are generated from the schema table
// into walk_gen.go; this file holds what they call off their fast paths. Each helper takes the
// message and the offset of a value in it and returns the offset past it, so that a walker
// keeps one slice and one index instead of re-slicing at every field.

//go:generate go run ./internal/walkgen

// readTag reads a tag at b[i] that is not a one-byte tag of a valid field number. Two-byte
// tags, those of fields 16 to 2047 (a span's flags), are read here; a two-byte tag of field 0
// (a padded one-byte tag) and longer tags go through consumeTag, which refuses field 0.
func readTag(b []byte, i int) (tag uint64, next int, err error) {
	if len(b)-i >= 2 && b[i] >= 0x80 && b[i+1] < 0x80 {
		if tag = uint64(b[i]&0x7f) | uint64(b[i+1])<<7; tag >= 8 {
			return tag, i + 2, nil
		}
	}
	num, typ, n, err := consumeTag(b[i:])
	if err != nil {
		return 0, 0, err
	}
	return uint64(num)<<3 | uint64(typ), i + n, nil
}

// skipVarint skips a varint of two bytes or more at b[i]. One of up to eight bytes is found
// in a word by its first byte without the high bit, with no branch on its length.
//
// A varint that ends its message, closer than eight bytes to the end of b, is the common case
// and not the exception: an integer attribute's AnyValue holds nothing after its int_value,
// and the walkers pass each message cut at its end. Its bytes are read from the last word of
// b, which starts before b[i]: the walkers' b begins at the start of the resource entry.
func skipVarint(b []byte, i int) (int, error) {
	if n := len(b) - i; n >= 8 {
		if end := ^binary.LittleEndian.Uint64(b[i:]) & hiBits; end != 0 {
			return i + bits.TrailingZeros64(end)/8 + 1, nil
		}
	} else if n > 0 && len(b) >= 8 {
		// The n bytes from b[i] on, at the bottom of the word; the bytes above them, shifted
		// in as zeros, are masked off. A varint of fewer than eight bytes cannot overflow.
		w := binary.LittleEndian.Uint64(b[len(b)-8:]) >> (64 - 8*uint(n))
		if end := ^w & hiBits & (1<<(8*uint(n)) - 1); end != 0 {
			return i + bits.TrailingZeros64(end)/8 + 1, nil
		}
		return 0, ErrTruncated
	}
	_, n := protowire.ConsumeVarint(b[i:])
	if n < 0 {
		return 0, varintErr(n)
	}
	return i + n, nil
}

// readLen reads the length prefix at b[i]: the payload is b[s:e]. Two-byte lengths, those of
// most spans, data points and log records, are read here; the rest goes through protowire.
func readLen(b []byte, i int) (s, e int, err error) {
	if len(b)-i >= 2 && b[i] >= 0x80 && b[i+1] < 0x80 {
		if l := int(b[i]&0x7f) | int(b[i+1])<<7; l <= len(b)-i-2 {
			return i + 2, i + 2 + l, nil
		}
	}
	p, n, err := consumeLen(b[i:])
	if err != nil {
		return 0, 0, err
	}
	return i + p, i + n, nil
}

// skipLen skips a length-delimited value at b[i].
func skipLen(b []byte, i int) (int, error) {
	_, n, err := consumeLen(b[i:])
	if err != nil {
		return 0, err
	}
	return i + n, nil
}

// skipID skips the value of an id field at b[i], which the Collector's decoder takes only when
// it is empty or size bytes long (see traceIDSize).
func skipID(b []byte, i, size int) (int, error) {
	p, n, err := consumeLen(b[i:])
	if err != nil {
		return 0, err
	}
	if l := n - p; l != 0 && l != size {
		return 0, ErrIDLength
	}
	return i + n, nil
}

// skipField skips the value of an unknown field of wire type tag&7 at b[i].
func skipField(b []byte, i int, tag uint64) (int, error) {
	n, err := skipValue(b[i:], protowire.Type(tag&7))
	if err != nil {
		return 0, err
	}
	return i + n, nil
}

// packedVarints checks a packed run of varints, which must end exactly at the end of its last
// element.
func packedVarints(run []byte) error {
	for len(run) > 0 {
		_, n := protowire.ConsumeVarint(run)
		if n < 0 {
			if err := varintErr(n); err != ErrTruncated {
				return err
			}
			return ErrPacked
		}
		run = run[n:]
	}
	return nil
}
