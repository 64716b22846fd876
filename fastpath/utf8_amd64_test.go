//go:build !purego

package fastpath

import "testing"

// TestHighBitsVariants holds each vector gathering of high bits this processor runs to a loop
// over bytes, whichever of them highBits picks here: the others run on other machines.
func TestHighBitsVariants(t *testing.T) {
	src := make([]byte, 64*9)
	for i := range src {
		src[i] = byte(i*151 + i/7)
	}
	variants := []struct {
		name string
		ok   bool
		run  func(dst *uint64, src *byte, words int)
	}{{"AVX-512", hasAVX512, highBitsAVX512}, {"AVX2", hasAVX2, highBitsAVX2}, {"SSE2", true, highBitsSSE2}}
	for _, v := range variants {
		if !v.ok {
			t.Logf("%s: not on this processor", v.name)
			continue
		}
		for words := range 10 {
			dst := make([]uint64, 10)
			for i := range dst {
				dst[i] = 0x5555 // a word past the last must keep what it held
			}
			v.run(&dst[0], &src[0], words)
			for i := range 64 * words {
				if got, want := dst[i/64]>>(i%64)&1 == 1, src[i] >= 0x80; got != want {
					t.Fatalf("%s, %d words: byte %d (%#x): bit %v", v.name, words, i, src[i], got)
				}
			}
			for i := words; i < len(dst); i++ {
				if dst[i] != 0x5555 {
					t.Fatalf("%s, %d words: word %d written", v.name, words, i)
				}
			}
		}
	}
}
