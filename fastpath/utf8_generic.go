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
