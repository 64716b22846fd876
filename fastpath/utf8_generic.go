//go:build !amd64 || purego

package fastpath

import "encoding/binary"

// validUTF8 is utf8.Valid; see validUTF8Go.
func validUTF8(b []byte) bool { return validUTF8Go(b) }

// highBits sets bit k of dst[i] to the high bit of src[64*i+k], for every word of dst; src
// holds 64 bytes per word of dst.
func highBits(dst []uint64, src []byte) {
	for i := range dst {
		var w uint64
		for k := 0; k < 8; k++ {
			w |= gatherHigh(binary.LittleEndian.Uint64(src[64*i+8*k:])) << (8 * k)
		}
		dst[i] = w
	}
}
