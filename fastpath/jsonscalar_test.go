package fastpath

import (
	"strconv"
	"testing"
)

// TestDecimalPrefix holds decimalPrefix to a digit-by-digit reading on runs of digits of every
// length up to past its 19-digit cap, each followed by every kind of byte, with a non-digit at
// every position (the word reading must stop at the run's end and never read past the slice).
func TestDecimalPrefix(t *testing.T) {
	ref := func(b []byte) (x uint64, n int) {
		for n < len(b) && n < 19 && b[n] >= '0' && b[n] <= '9' {
			x = x*10 + uint64(b[n]-'0')
			n++
		}
		return x, n
	}
	digits := "9876543210123456789012"
	for l := range len(digits) {
		for _, after := range []string{"", "\"", "/", ":", "0", "a", "\x00", "\xff", ".", "e"} {
			base := []byte(digits[:l] + after)
			for bad := -1; bad < l; bad++ {
				b := append([]byte(nil), base...)
				for _, c := range []byte{'/', ':', '?', ' ', '@', 0xb0, 0xb9, 0x7f} {
					if bad >= 0 {
						b[bad] = c
					}
					x, n := decimalPrefix(b)
					wx, wn := ref(b)
					if x != wx || n != wn {
						t.Fatalf("%q: %d, %d; want %d, %d", b, x, n, wx, wn)
					}
				}
			}
		}
	}
	if x, n := decimalPrefix([]byte("1718000000123456789\"")); x != 1718000000123456789 || n != 19 {
		t.Fatalf("a time: %d, %d", x, n)
	}
	if x, _ := decimalPrefix([]byte(strconv.FormatUint(9999999999999999999, 10))); x != 9999999999999999999 {
		t.Fatalf("19 nines: %d", x)
	}
}
