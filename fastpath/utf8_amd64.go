//go:build !purego

package fastpath

import "golang.org/x/sys/cpu"

// hasAVX2 is read once: the processor and the operating system (which must save the 256-bit
// registers) do not change while the process runs.
var hasAVX2 = cpu.X86.HasAVX2

// hasAVX512 is whether the processor and the operating system offer the 64-byte registers and
// the byte-mask moves of AVX-512BW. The ASCII map's bits then take one load and one mask move
// per 64 bytes; both are among the instructions that do not lower the clock on processors that
// slow down for heavy 512-bit work.
var hasAVX512 = cpu.X86.HasAVX512BW

// validUTF8 is utf8.Valid. With AVX2 it checks 32 bytes per step by table lookups
// (utf8_amd64.s), several times as fast as utf8.Valid on text outside ASCII; a string shorter
// than a block is first tested for ASCII in words, as most are. Without AVX2 it runs the
// pure-Go automaton.
func validUTF8(b []byte) bool {
	if !hasAVX2 {
		return validUTF8Go(b)
	}
	if len(b) < 32 && asciiShort(b) {
		return true
	}
	var tail [32]byte
	copy(tail[:], b[len(b)&^31:])
	return validBlocksAVX2(b, &tail)
}

// highBits sets bit k%64 of dst[k/64] to the high bit of src[k], for every bit of dst.
func highBits(dst []uint64, src []byte) {
	if len(src) < 64*len(dst) {
		panic("BUG: fastpath highBits called with fewer source bytes than bits")
	}
	if len(dst) == 0 {
		return
	}
	switch {
	case hasAVX512:
		highBitsAVX512(&dst[0], &src[0], len(dst))
	case hasAVX2:
		highBitsAVX2(&dst[0], &src[0], len(dst))
	default:
		highBitsSSE2(&dst[0], &src[0], len(dst))
	}
}

//go:noescape
func validBlocksAVX2(b []byte, tail *[32]byte) bool

//go:noescape
func highBitsAVX2(dst *uint64, src *byte, words int)

//go:noescape
func highBitsAVX512(dst *uint64, src *byte, words int)

//go:noescape
func highBitsSSE2(dst *uint64, src *byte, words int)
