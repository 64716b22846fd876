package uds

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

var errJSON = errors.New("uds: malformed span JSON")

// maxJSONDepth bounds nesting inside values the converter skips or copies verbatim.
const maxJSONDepth = 64

// jsonScanner is a pull parser over one TRACE_EXPORT payload, made for the handful of shapes
// json_encode produces for OpenCensus spans. Errors are sticky: after the first one every method
// returns a zero value and err is checked once at the end.
//
// Strings without escapes are returned as views of the payload; unescaped strings are appended
// to arena. Both stay valid until reset.
type jsonScanner struct {
	b     []byte
	i     int
	err   error
	arena []byte
}

func (s *jsonScanner) reset(b []byte) {
	s.b, s.i, s.err = b, 0, nil
	s.arena = s.arena[:0]
}

func (s *jsonScanner) fail() {
	if s.err == nil {
		s.err = errJSON
	}
	s.i = len(s.b)
}

// peek skips white space and returns the next byte, 0 at the end.
func (s *jsonScanner) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// end reports whether only white space is left.
func (s *jsonScanner) end() bool { return s.peek() == 0 && s.i == len(s.b) }

func (s *jsonScanner) expect(c byte) bool {
	if s.peek() != c {
		s.fail()
		return false
	}
	s.i++
	return true
}

// elem iterates an array that the caller opened with expect('['): it returns true when an element
// follows. first must start true.
func (s *jsonScanner) elem(first *bool) bool {
	c := s.peek()
	if c == ']' {
		s.i++
		return false
	}
	if !*first {
		if c != ',' {
			s.fail()
			return false
		}
		s.i++
	} else if c == 0 {
		s.fail()
		return false
	}
	*first = false
	return s.err == nil
}

// key iterates an object that the caller opened with expect('{'): it returns the next key and
// consumes the colon, or false at the closing brace.
func (s *jsonScanner) key(first *bool) ([]byte, bool) {
	c := s.peek()
	if c == '}' {
		s.i++
		return nil, false
	}
	if !*first {
		if c != ',' {
			s.fail()
			return nil, false
		}
		s.i++
	}
	*first = false
	if s.peek() != '"' {
		s.fail()
		return nil, false
	}
	k := s.str()
	if !s.expect(':') {
		return nil, false
	}
	return k, s.err == nil
}

// str parses a string token.
func (s *jsonScanner) str() []byte {
	if s.peek() != '"' {
		s.fail()
		return nil
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i:s.i]
			s.i++
			return v
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			s.fail()
			return nil
		}
		s.i++
	}
	s.fail()
	return nil
}

// strEscaped finishes a string that contains escapes, unescaping it into the arena.
func (s *jsonScanner) strEscaped(start int) []byte {
	from := len(s.arena)
	s.arena = append(s.arena, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.arena[from:len(s.arena):len(s.arena)]
		case c < 0x20:
			s.fail()
			return nil
		case c != '\\':
			s.arena = append(s.arena, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			s.fail()
			return nil
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			s.arena = append(s.arena, e)
		case 'b':
			s.arena = append(s.arena, '\b')
		case 'f':
			s.arena = append(s.arena, '\f')
		case 'n':
			s.arena = append(s.arena, '\n')
		case 'r':
			s.arena = append(s.arena, '\r')
		case 't':
			s.arena = append(s.arena, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate pairs with an immediately following \uXXXX low surrogate;
				// anything else is replaced, as encoding/json does.
				r2 := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					lo, ok := s.hex4()
					if !ok {
						return nil
					}
					if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
						r2 = d
					} else {
						s.i = save
					}
				}
				r = r2
			}
			s.arena = utf8.AppendRune(s.arena, r)
		default:
			s.fail()
			return nil
		}
	}
	s.fail()
	return nil
}

func (s *jsonScanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		s.fail()
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			s.fail()
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	s.i += 4
	return r, true
}

// number parses a number token and returns its text; isInt is set when it has no fraction or
// exponent.
func (s *jsonScanner) number() (text []byte, isInt bool) {
	s.peek()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if !s.digits() {
		s.fail()
		return nil, false
	}
	if s.b[start] == '-' && s.b[start+1] == '0' && s.i-start > 2 || s.b[start] == '0' && s.i-start > 1 {
		s.fail() // leading zero
		return nil, false
	}
	isInt = true
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		isInt = false
		if !s.digits() {
			s.fail()
			return nil, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		isInt = false
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			s.fail()
			return nil, false
		}
	}
	return s.b[start:s.i:s.i], isInt
}

func (s *jsonScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// literal consumes true, false or null and returns its first byte.
func (s *jsonScanner) literal() byte {
	c := s.peek()
	var word string
	switch c {
	case 't':
		word = "true"
	case 'f':
		word = "false"
	case 'n':
		word = "null"
	default:
		s.fail()
		return 0
	}
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		s.fail()
		return 0
	}
	s.i += len(word)
	return c
}

// skip consumes one value of any type and returns its text.
func (s *jsonScanner) skip() []byte {
	s.peek()
	start := s.i
	s.skipDepth(0)
	if s.err != nil {
		return nil
	}
	return s.b[start:s.i:s.i]
}

func (s *jsonScanner) skipDepth(depth int) {
	if depth > maxJSONDepth {
		s.fail()
		return
	}
	switch c := s.peek(); c {
	case '"':
		s.str()
	case '{':
		s.i++
		for first := true; ; {
			if _, ok := s.key(&first); !ok {
				return
			}
			s.skipDepth(depth + 1)
		}
	case '[':
		s.i++
		for first := true; s.elem(&first); {
			s.skipDepth(depth + 1)
		}
	case 't', 'f', 'n':
		s.literal()
	default:
		s.number()
	}
}
