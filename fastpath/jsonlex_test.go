package fastpath

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// scanStringRef is scanString byte by byte: the closing quote, whether a backslash came
// first, and whether the content before the quote holds a byte outside ASCII.
func scanStringRef(b []byte, j int) (end int, esc, high, ok bool) {
	for k := j; k < len(b); k++ {
		switch b[k] {
		case '"':
			return k, esc, esc || !isASCII(b[j:k]), true
		case '\\':
			esc = true
			k++
		}
	}
	return 0, esc, esc, false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// TestScanString puts a quote, a backslash and a byte outside ASCII at every position of
// strings of every length up to past two words, at every offset from the end of the buffer
// (the word loop reads eight bytes at a time and must stop short of the end).
func TestScanString(t *testing.T) {
	for n := range 20 {
		for tail := range 10 {
			for q := -1; q < n; q++ {
				for _, mark := range []byte{0, '\\', 0xe9, '"', 0x80} {
					for m := range n {
						body := bytes.Repeat([]byte{'a'}, n+tail)
						if q >= 0 {
							body[q] = '"'
						}
						if mark != 0 && m != q {
							body[m] = mark
						}
						end, esc, high, ok := scanString(body, 0)
						wend, wesc, whigh, wok := scanStringRef(body, 0)
						if ok != wok || ok && (end != wend || esc != wesc || high && !whigh || !wesc && high != whigh) {
							t.Fatalf("%q: scanString %d %v %v %v, want %d %v %v %v", body, end, esc, high, ok, wend, wesc, whigh, wok)
						}
						if se, sesc, sok := stringEnd(body, 0); se != end || sesc != esc || sok != ok {
							t.Fatalf("%q: stringEnd and scanString differ", body)
						}
					}
				}
			}
		}
	}
}
