package h2

import "math"

// HPACK's integers (RFC 7541 §5.1): a value in the low bits of a first octet when it fits,
// else those bits all ones and the rest in 7-bit groups, least significant first.

// readInt reads an integer with an N-bit prefix (RFC 7541 §5.1). Values past 2^32-1 and
// encodings longer than the prefix and 9 octets are refused: no count HPACK carries is larger,
// and the octet bound is the one x/net's decoder applies, so that both accept the same blocks.
func readInt(p []byte, prefix uint) (uint32, []byte, error) {
	if len(p) == 0 {
		return 0, nil, ErrTruncated
	}
	mask := byte(1)<<prefix - 1
	v := uint64(p[0] & mask)
	p = p[1:]
	if v < uint64(mask) {
		return uint32(v), p, nil
	}
	for i := 0; ; i++ {
		if len(p) == 0 {
			return 0, nil, ErrTruncated
		}
		b := p[0]
		p = p[1:]
		v += uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			break
		}
		if i == 8 {
			return 0, nil, ErrInteger
		}
	}
	if v > math.MaxUint32 {
		return 0, nil, ErrInteger
	}
	return uint32(v), p, nil
}

// appendInt appends v with an n-bit prefix whose other bits are first (RFC 7541 §5.1).
func appendInt(dst []byte, n uint, first byte, v uint64) []byte {
	mask := uint64(1)<<n - 1
	if v < mask {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(mask))
	v -= mask
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}
