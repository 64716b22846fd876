package fastpath

import (
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
