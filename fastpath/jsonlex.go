package fastpath

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON tokenizer of the transcoder. It accepts exactly the grammar the tree parser it
// replaced (fastjson 1.6) accepted, so that the move to a stream changed no verdict on any
// body: whitespace is space, tab, CR and LF; strings end at the first quote not escaped by a
// backslash, and neither their escapes nor their control characters are checked (a field's
// value is checked for what its type needs once unescaped); a number token is any run of
// digits, '.', 'e', 'E', '+' and '-', or "inf" / "nan" in any case after at most one sign,
// and only the fields that hold numbers check it against the JSON number grammar; nesting
// deeper than maxJSONDepth values is refused, wherever it is.

// maxJSONDepth bounds how deeply JSON values nest, counting the body's top-level value as 1
// (the tree parser's limit, kept so that no body it refused is now accepted). Messages are
// bounded sooner, by MaxNesting; this bound is for what the schema does not know, the values
// of unknown keys, which the transcoder passes over without a stack.
const maxJSONDepth = 300

// jsonKind is the JSON type of a value.
type jsonKind uint8

const (
	jkObject jsonKind = iota + 1
	jkArray
	jkString
	jkNumber
	jkTrue
	jkFalse
	jkNull
)

// jsonToken is a scalar value as it stands in the body: a string's raw content (between the
// quotes, escapes not yet undone: esc says whether there are any) or a number's text. For an
// object or an array only the kind is set. text points into the body.
type jsonToken struct {
	kind jsonKind
	esc  bool
	text []byte
}

// skipWS returns the index of the first byte at or after i that is not JSON whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd finds the closing quote of the string whose content starts at b[j], and reports
// whether the content holds a backslash; ok is false when the string never closes.
func stringEnd(b []byte, j int) (end int, esc, ok bool) {
	end, esc, _, ok = scanString(b, j)
	return end, esc, ok
}

// scanString is stringEnd that also reports whether the content may hold a byte outside ASCII
// (high: always when it holds a backslash), so that a string field's plain ASCII value needs
// no UTF-8 check.
//
// It reads eight bytes a step and finds a quote or a backslash among them with word
// arithmetic: keys and values are mostly 4 to 40 bytes, too short for a vector search to pay
// for its set-up, too long for a byte loop to be quick.
func scanString(b []byte, j int) (end int, esc, high, ok bool) {
	var or uint64 // the bytes before j, ORed together
	for ; j+8 <= len(b); j += 8 {
		w := binary.LittleEndian.Uint64(b[j:])
		q, s := matchByte(w, '"'), matchByte(w, '\\')
		if m := q | s; m != 0 {
			first := m & -m // the top bit of the first match, exact (see matchByte)
			if q&first == 0 {
				end, ok = escapedStringEnd(b, j+bits.TrailingZeros64(m)>>3)
				return end, true, true, ok
			}
			// The bytes of w before the quote.
			or |= w & (first>>7 - 1)
			return j + bits.TrailingZeros64(m)>>3, false, or&bytes80 != 0, true
		}
		or |= w
	}
	for ; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			return j, false, or&bytes80 != 0, true
		case '\\':
			end, ok = escapedStringEnd(b, j)
			return end, true, true, ok
		default:
			or |= uint64(c)
		}
	}
	return 0, false, false, false
}

// Word constants of matchByte: a byte value in every byte of a uint64.
const (
	bytes01 = 0x0101010101010101
	bytes80 = 0x8080808080808080
)

// matchByte returns a word with the top bit set in the bytes of w (in memory order) equal to
// c. The lowest set bit is exact; a bit above it may be set for a byte that is not c (the
// subtraction borrows past a match), never one below it.
func matchByte(w uint64, c byte) uint64 {
	x := w ^ (bytes01 * uint64(c))
	return (x - bytes01) &^ x & bytes80
}

// escapedStringEnd finishes scanString from the backslash at b[k].
func escapedStringEnd(b []byte, k int) (end int, ok bool) {
	for ; k < len(b); k++ {
		switch b[k] {
		case '"':
			return k, true
		case '\\':
			k++ // the escaped byte, a quote included, does not end the string
		}
	}
	return 0, false
}

// numberChar reports the bytes a number token runs over.
func numberChar(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'
}

// foldEq3 compares b[i:i+3] with the lower-case ASCII word w, ignoring the case of b.
func foldEq3(b []byte, i int, w string) bool {
	if len(b)-i < 3 {
		return false
	}
	for k := range 3 {
		if b[i+k]|0x20 != w[k] {
			return false
		}
	}
	return true
}

// literal reads true, false, null or a number token at b[i] (which exists), and returns its
// kind and the index after it.
func literal(b []byte, i int) (jsonKind, int, error) {
	switch b[i] {
	case 't':
		if bytes.HasPrefix(b[i:], []byte("true")) {
			return jkTrue, i + 4, nil
		}
		return 0, i, ErrJSONSyntax
	case 'f':
		if bytes.HasPrefix(b[i:], []byte("false")) {
			return jkFalse, i + 5, nil
		}
		return 0, i, ErrJSONSyntax
	case 'n':
		if bytes.HasPrefix(b[i:], []byte("null")) {
			return jkNull, i + 4, nil
		}
		if foldEq3(b, i, "nan") {
			return jkNumber, i + 3, nil
		}
		return 0, i, ErrJSONSyntax
	}
	j := i
	for j < len(b) && numberChar(b[j]) {
		j++
	}
	if j == len(b) {
		return jkNumber, j, nil
	}
	if j == i || j == i+1 && (b[i] == '-' || b[i] == '+') {
		// No digits yet: the only words a number may be are inf and nan.
		if foldEq3(b, j, "inf") || foldEq3(b, j, "nan") {
			return jkNumber, j + 3, nil
		}
		return 0, i, ErrJSONSyntax
	}
	return jkNumber, j, nil
}

// token reads the value at b[i] (which exists): a scalar whole, an object or an array by its
// kind only (the index returned is then i).
func token(b []byte, i int) (jsonToken, int, error) {
	switch b[i] {
	case '{':
		return jsonToken{kind: jkObject}, i, nil
	case '[':
		return jsonToken{kind: jkArray}, i, nil
	case '"':
		e, esc, ok := stringEnd(b, i+1)
		if !ok {
			return jsonToken{}, i, ErrJSONSyntax
		}
		return jsonToken{kind: jkString, esc: esc, text: b[i+1 : e]}, e + 1, nil
	}
	k, e, err := literal(b, i)
	return jsonToken{kind: k, text: b[i:e]}, e, err
}

// skipJSON checks the syntax of the value at b[i], at depth d, and returns the index after
// it. It keeps one bit per open container (object or array), so its memory is fixed however
// the value nests.
func skipJSON(b []byte, i, d int) (int, error) {
	var objs [(maxJSONDepth + 63) / 64]uint64 // bit k: the container at depth top+k is an object
	top := d
	for {
		// A value starts at b[i], at depth d.
		if d > maxJSONDepth || i >= len(b) {
			return i, ErrJSONSyntax
		}
		switch c := b[i]; c {
		case '{', '[':
			i = skipWS(b, i+1)
			if i >= len(b) {
				return i, ErrJSONSyntax
			}
			if c == '{' && b[i] == '}' || c == '[' && b[i] == ']' {
				i++
				break
			}
			k := d - top
			if c == '{' {
				objs[k/64] |= 1 << (k % 64)
				var err error
				if i, err = skipKey(b, i); err != nil {
					return i, err
				}
			} else {
				objs[k/64] &^= 1 << (k % 64)
			}
			d++
			continue
		case '"':
			e, _, ok := stringEnd(b, i+1)
			if !ok {
				return i, ErrJSONSyntax
			}
			i = e + 1
		default:
			var err error
			if _, i, err = literal(b, i); err != nil {
				return i, err
			}
		}
		// A value ended before b[i]: close the containers it ends, or go on to the next member.
	next:
		for {
			if d == top {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, ErrJSONSyntax
			}
			k := d - 1 - top
			obj := objs[k/64]>>(k%64)&1 != 0
			switch {
			case b[i] == ',':
				i = skipWS(b, i+1)
				if obj {
					var err error
					if i, err = skipKey(b, i); err != nil {
						return i, err
					}
				}
				break next
			case obj && b[i] == '}', !obj && b[i] == ']':
				i++
				d--
			default:
				return i, ErrJSONSyntax
			}
		}
	}
}

// skipKey passes over an object key at b[i], its colon and the whitespace around, and returns
// the index where the member's value starts.
func skipKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, ErrJSONSyntax
	}
	e, _, ok := stringEnd(b, i+1)
	if !ok {
		return i, ErrJSONSyntax
	}
	i = skipWS(b, e+1)
	if i >= len(b) || b[i] != ':' {
		return i, ErrJSONSyntax
	}
	return skipWS(b, i+1), nil
}

// appendUnescaped appends the string content s with its escapes undone, as the tree parser
// undid them (best effort): the JSON escapes and \uXXXX, a surrogate pair joined into one
// character (an unpaired or mismatched pair into U+FFFD, consuming both escapes), and every
// escape it cannot read kept as written. The result is never longer than s, so a caller that
// reserved len(s) bytes has room.
func appendUnescaped(dst, s []byte) []byte {
	for {
		n := bytes.IndexByte(s, '\\')
		if n < 0 || n == len(s)-1 {
			// A string's content never ends in a lone backslash: the quote after it would not
			// have ended the string. Kept as written all the same.
			return append(dst, s...)
		}
		dst = append(dst, s[:n]...)
		c := s[n+1]
		s = s[n+2:]
		switch c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			x, ok := hex4(s)
			if !ok {
				dst = append(dst, '\\', 'u')
				break
			}
			xs := s[:4]
			s = s[4:]
			if !utf16.IsSurrogate(rune(x)) {
				dst = utf8.AppendRune(dst, rune(x))
				break
			}
			if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
				dst = append(append(dst, '\\', 'u'), xs...)
				break
			}
			y, ok := hex4(s[2:])
			if !ok {
				dst = append(append(dst, '\\', 'u'), xs...)
				break
			}
			dst = utf8.AppendRune(dst, utf16.DecodeRune(rune(x), rune(y)))
			s = s[6:]
		default:
			dst = append(dst, '\\', c)
		}
	}
}

// hex4 reads four hex digits at the start of s.
func hex4(s []byte) (uint16, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var x uint16
	for _, c := range s[:4] {
		d, ok := fromHex(c)
		if !ok {
			return 0, false
		}
		x = x<<4 | uint16(d)
	}
	return x, true
}
