package fastpath

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidUTF8MatchesStdlib(t *testing.T) {
	cases := []string{"", "a", "abcdefgh", "abcdefghi", "héllo", "abcdefg\xff", "\xffabcdefgh", "abcdefgh\xc3\x28",
		"日本語のテキスト", "\xed\xa0\x80", "0123456789abcdef\xf0\x9f\x98\x80", "0123456789abcdef\xf0\x9f\x98"}
	for _, c := range cases {
		if got, want := validUTF8([]byte(c)), utf8.ValidString(c); got != want {
			t.Errorf("validUTF8(%q) = %v, want %v", c, got, want)
		}
	}
}

func FuzzValidUTF8(f *testing.F) {
	f.Add([]byte("plain ascii text"))
	f.Add([]byte("abcdefgh\xc3\x28"))
	// Characters cut by the 32-byte blocks of the vector check, and lengths around a block.
	f.Add([]byte(strings.Repeat("a", 31) + "\xc3\xa9" + strings.Repeat("b", 29) + "\xe6\x97\xa5"))
	f.Add([]byte(strings.Repeat("a", 30) + "\xf0\x9f\x98\x80" + strings.Repeat("é", 15)))
	f.Add([]byte(strings.Repeat("日本語", 11)))
	f.Add([]byte(strings.Repeat("z", 63) + "\xe0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Each input is also tried behind 0 to 63 bytes of ASCII, which moves every block
		// boundary across it, and with its last byte cut off, which may leave a character open.
		buf := make([]byte, 0, 64+len(b))
		for pad := range 64 {
			buf = append(append(buf[:0], strings.Repeat("p", pad)...), b...)
			want := utf8.Valid(buf)
			if got := validUTF8(buf); got != want {
				t.Fatalf("validUTF8(%q) = %v, utf8.Valid %v", buf, got, want)
			}
			if got := validUTF8Go(buf); got != want {
				t.Fatalf("validUTF8Go(%q) = %v, utf8.Valid %v", buf, got, want)
			}
			if len(buf) > 0 {
				if got, want := validUTF8(buf[:len(buf)-1]), utf8.Valid(buf[:len(buf)-1]); got != want {
					t.Fatalf("validUTF8(%q) = %v, utf8.Valid %v", buf[:len(buf)-1], got, want)
				}
			}
		}
	})
}

// TestValidUTF8Sequences compares validUTF8 and validUTF8Go with utf8.Valid on every one- and two-byte string,
// on three- and four-byte strings built from the bytes where the rules change, and on each of
// those placed at every offset of a long string, where the check runs in two halves.
func TestValidUTF8Sequences(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		want := utf8.Valid(b)
		if got := validUTF8(b); got != want {
			t.Fatalf("validUTF8(%q) = %v, want %v", b, got, want)
		}
		// The pure-Go automaton, which validUTF8 runs only without AVX2 or with purego.
		if got := validUTF8Go(b); got != want {
			t.Fatalf("validUTF8Go(%q) = %v, want %v", b, got, want)
		}
	}
	for x := range 256 {
		check([]byte{byte(x)})
		for y := range 256 {
			check([]byte{byte(x), byte(y)})
		}
	}
	edges := []byte{0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff}
	var seqs [][]byte
	for _, a := range edges {
		for _, b := range edges {
			for _, c := range edges {
				seqs = append(seqs, []byte{a, b, c})
				for _, d := range edges {
					seqs = append(seqs, []byte{a, b, c, d})
				}
			}
		}
	}
	for _, s := range seqs {
		check(s)
	}
	long := []byte(strings.Repeat("Grüße 日本 ", 12)) // 144 bytes, outside ASCII throughout
	buf := make([]byte, len(long))
	// Every 97th sequence at every offset: across the 32-byte blocks of the vector check and
	// the halves of the automaton.
	for i := 0; i < len(seqs); i += 97 {
		for off := 0; off+len(seqs[i]) <= len(long); off++ {
			copy(buf, long)
			copy(buf[off:], seqs[i])
			check(buf)
		}
	}
}

// TestValidString checks asciiMap, then validUTF8, against utf8.Valid for every string of up to
// 70 bytes at every place in a message mixing ASCII and other bytes, valid UTF-8 and not: once
// with a map used as the walkers use it, strings in increasing order, and once with a fresh map
// for each string.
func TestValidString(t *testing.T) {
	b := []byte("ab\xc3\xa9cdefghijklmnopqrstuvwxyz0123456789\xe6\x97\xa5ABCDEFGHIJKLMNOPQRSTUVWXYZ!" +
		"0123456789abcdefghijklmnopqrstuvwxyz\xffABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnop")
	shared := asciiMap{src: b}
	for s := 0; s <= len(b); s++ {
		for e := s; e <= len(b) && e-s <= 70; e++ {
			want := utf8.Valid(b[s:e])
			if got := shared.ascii(s, e) || shared.check(s, e); got != want {
				t.Fatalf("shared map, string [%d:%d] %q: %v", s, e, b[s:e], got)
			}
			fresh := asciiMap{src: b}
			if got := fresh.ascii(s, e) || fresh.check(s, e); got != want {
				t.Fatalf("fresh map, string [%d:%d] %q: %v", s, e, b[s:e], got)
			}
		}
	}
}

// TestASCIIMapWindows walks strings across several windows of a long entry, with one byte
// outside ASCII placed before, inside and after each string in turn, and checks each answer:
// ascii never says true of a string that is not ASCII, and says it of every ASCII string of up
// to 64 bytes inside the window, so that such strings never leave the walker's own test; check
// answers for every length, those it looks up in the map (up to asciiLong) and longer ones.
func TestASCIIMapWindows(t *testing.T) {
	src := []byte(strings.Repeat("0123456789abcdef", 3*asciiWindow/16+5))
	for _, hi := range []int{0, 63, 64, 65, asciiWindow - 1, asciiWindow, asciiWindow + 1, 2*asciiWindow + 7, len(src) - 1} {
		src[hi] = 0xff
		m := asciiMap{src: src}
		for s := 0; s < len(src); s += 13 {
			for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 55, 56, 57, 63, 64, 65, 100, 127, 128, 129,
				191, 192, 193, asciiLong - 1, asciiLong, asciiLong + 1, 1000} {
				e := s + n
				if e > len(src) {
					continue
				}
				want := hi < s || hi >= e
				inside := s >= m.base && e <= m.end
				fast := m.ascii(s, e)
				if fast && !want {
					t.Fatalf("byte 0xff at %d, string [%d:%d]: ascii says ASCII", hi, s, e)
				}
				if want && inside && n <= 64 && !fast {
					t.Fatalf("byte 0xff at %d, string [%d:%d] inside the window [%d:%d]: ascii does not know", hi, s, e, m.base, m.end)
				}
				if got := fast || m.check(s, e); got != want {
					t.Fatalf("byte 0xff at %d, string [%d:%d]: %v", hi, s, e, got)
				}
			}
		}
		src[hi] = '0'
	}
}

// TestHighBits checks the vector (or word) gathering of high bits against a loop over bytes.
func TestHighBits(t *testing.T) {
	src := make([]byte, 64*9)
	for i := range src {
		src[i] = byte(i*151 + i/7)
	}
	dst := make([]uint64, 9)
	highBits(dst, src)
	for i := range src {
		if got, want := dst[i/64]>>(i%64)&1 == 1, src[i] >= 0x80; got != want {
			t.Fatalf("byte %d (%#x): bit %v", i, src[i], got)
		}
	}
}
