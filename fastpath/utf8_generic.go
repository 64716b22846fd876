//go:build !amd64 || purego

package fastpath

import "encoding/binary"

// validUTF8 is utf8.Valid; see validUTF8Go.
func validUTF8(b []byte) bool { return validUTF8Go(b) }

// highBits sets bit k%64 of dst[k/64] to the high bit of src[k], for every bit of dst.
func highBits(dst []uint64, src []byte) {
	for i := range dst {
		var w uint64
		for k := range 8 {
			w |= gatherHigh(binary.LittleEndian.Uint64(src[64*i+8*k:])) << (8 * k)
		}
		dst[i] = w
	}
}

// gatherHigh packs the high bits of the eight bytes of w, little-endian, into a byte: each
// high bit, moved to the bottom of its byte, is multiplied up to bit 56+i by the one term of
// the constant that lands it there, and the sums never carry into one another.
func gatherHigh(w uint64) uint64 {
	return ((w & hiBits) >> 7 * 0x0102040810204080) >> 56
}
