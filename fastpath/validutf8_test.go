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
	f.Fuzz(func(t *testing.T, b []byte) {
		if validUTF8(b) != utf8.Valid(b) {
			t.Fatalf("validUTF8(%q) disagrees with utf8.Valid", b)
		}
	})
}

// TestValidUTF8Sequences compares validUTF8 with utf8.Valid on every one- and two-byte string,
// on three- and four-byte strings built from the bytes where the rules change, and on each of
// those placed at every offset of a long string, where the check runs in two halves.
func TestValidUTF8Sequences(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := validUTF8(b), utf8.Valid(b); got != want {
			t.Fatalf("validUTF8(%q) = %v, want %v", b, got, want)
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
	for i := 0; i < len(seqs); i += 97 {
		for off := 0; off+len(seqs[i]) <= len(long); off++ {
			copy(buf, long)
			copy(buf[off:], seqs[i])
			check(buf)
		}
	}
}

// TestValidString checks asciiTail, then validUTF8, against utf8.Valid for every string of up to 70 bytes at
// every place in a message mixing ASCII and other bytes, valid UTF-8 and not.
func TestValidString(t *testing.T) {
	b := []byte("ab\xc3\xa9cdefghijklmnopqrstuvwxyz0123456789\xe6\x97\xa5ABCDEFGHIJKLMNOPQRSTUVWXYZ!" +
		"0123456789abcdefghijklmnopqrstuvwxyz\xffABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnop")
	for s := 0; s <= len(b); s++ {
		for e := s; e <= len(b) && e-s <= 70; e++ {
			if got, want := asciiTail(b, s, e) || validUTF8(b[s:e]), utf8.Valid(b[s:e]); got != want {
				t.Fatalf("string [%d:%d] %q: %v", s, e, b[s:e], got)
			}
		}
	}
}
