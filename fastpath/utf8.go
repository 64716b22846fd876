package fastpath

import (
	"encoding/binary"
)

// The UTF-8 check in pure Go, for processors without AVX2 and for builds with the purego tag.
// On amd64 with AVX2, validUTF8 (utf8_amd64.go) runs a vector check instead; both accept
// exactly what utf8.Valid accepts.

const hiBits = 0x8080808080808080

// validUTF8Go is utf8.Valid, faster on the strings OTLP carries. Nearly all are ASCII and short:
// they are checked in whole words, the last one overlapping the one before rather than ending
// in a loop over bytes. Text outside ASCII runs through a shift-based automaton (utf8DFA), one
// table load and one shift per byte, in two independent halves for long strings so that the
// two chains of shifts overlap in the pipeline.
func validUTF8Go(b []byte) bool {
	n := len(b)
	switch {
	case n >= 8:
		i := 0
		for ; i+32 <= n; i += 32 {
			w := binary.LittleEndian.Uint64(b[i:]) | binary.LittleEndian.Uint64(b[i+8:]) |
				binary.LittleEndian.Uint64(b[i+16:]) | binary.LittleEndian.Uint64(b[i+24:])
			if w&hiBits != 0 {
				// Everything before b[i] is ASCII: the automaton starts there.
				return validUTF8Slow(b[i:])
			}
		}
		for ; i < n-8; i += 8 {
			if binary.LittleEndian.Uint64(b[i:])&hiBits != 0 {
				return validUTF8Slow(b[i:])
			}
		}
		if binary.LittleEndian.Uint64(b[n-8:])&hiBits != 0 {
			return validUTF8Slow(b[i:])
		}
		return true
	case n >= 4:
		if (binary.LittleEndian.Uint32(b)|binary.LittleEndian.Uint32(b[n-4:]))&0x80808080 != 0 {
			return validUTF8Slow(b)
		}
		return true
	case n > 0:
		if (b[0]|b[n/2]|b[n-1])&0x80 != 0 {
			return validUTF8Slow(b)
		}
	}
	return true
}

// validUTF8Slow checks b with the automaton. A string of 64 bytes or more is cut in two at a
// character start near its middle: it is valid exactly when both halves are, and the halves
// are walked in step.
func validUTF8Slow(b []byte) bool {
	if len(b) < 64 {
		return dfaRun(dfaAccept, b)&63 == dfaAccept
	}
	mid := len(b) / 2
	// A character has at most three continuation bytes (10xxxxxx); four in a row are invalid.
	for k := 0; k < 3 && b[mid]&0xc0 == 0x80; k++ {
		mid--
	}
	if b[mid]&0xc0 == 0x80 {
		return false
	}
	x, y := b[:mid], b[mid:]
	sx, sy := uint64(dfaAccept), uint64(dfaAccept)
	for len(x) >= 8 && len(y) >= 8 {
		// The state sits in the low six bits; the bits above are the rest of the row and are
		// ignored by the next shift, which the hardware takes modulo 64.
		sx = utf8DFA[x[0]] >> (sx & 63)
		sy = utf8DFA[y[0]] >> (sy & 63)
		sx = utf8DFA[x[1]] >> (sx & 63)
		sy = utf8DFA[y[1]] >> (sy & 63)
		sx = utf8DFA[x[2]] >> (sx & 63)
		sy = utf8DFA[y[2]] >> (sy & 63)
		sx = utf8DFA[x[3]] >> (sx & 63)
		sy = utf8DFA[y[3]] >> (sy & 63)
		sx = utf8DFA[x[4]] >> (sx & 63)
		sy = utf8DFA[y[4]] >> (sy & 63)
		sx = utf8DFA[x[5]] >> (sx & 63)
		sy = utf8DFA[y[5]] >> (sy & 63)
		sx = utf8DFA[x[6]] >> (sx & 63)
		sy = utf8DFA[y[6]] >> (sy & 63)
		sx = utf8DFA[x[7]] >> (sx & 63)
		sy = utf8DFA[y[7]] >> (sy & 63)
		x, y = x[8:], y[8:]
		if sx&63 == dfaError || sy&63 == dfaError {
			return false
		}
	}
	return dfaRun(sx, x)&63 == dfaAccept && dfaRun(sy, y)&63 == dfaAccept
}

// dfaRun runs the automaton from state st over b, skipping whole ASCII words between
// characters, and returns the state it ends in.
func dfaRun(st uint64, b []byte) uint64 {
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if st&63 == dfaAccept && w&hiBits == 0 {
			continue
		}
		st = utf8DFA[byte(w)] >> (st & 63)
		st = utf8DFA[byte(w>>8)] >> (st & 63)
		st = utf8DFA[byte(w>>16)] >> (st & 63)
		st = utf8DFA[byte(w>>24)] >> (st & 63)
		st = utf8DFA[byte(w>>32)] >> (st & 63)
		st = utf8DFA[byte(w>>40)] >> (st & 63)
		st = utf8DFA[byte(w>>48)] >> (st & 63)
		st = utf8DFA[byte(w>>56)] >> (st & 63)
		if st&63 == dfaError {
			return st
		}
	}
	for _, c := range b {
		st = utf8DFA[c] >> (st & 63)
	}
	return st
}

// The states of the UTF-8 automaton, each a multiple of six: the bit offset, in a row of
// utf8DFA, of the six bits that hold the next state.
const (
	dfaAccept = 6 * iota // between characters
	dfaError             // absorbing
	dfaCont1             // one continuation byte (80-BF) to go
	dfaCont2             // two to go
	dfaE0                // after E0: A0-BF (no overlong forms), then one more
	dfaED                // after ED: 80-9F (no surrogates), then one more
	dfaF0                // after F0: 90-BF (no overlong forms), then two more
	dfaF1                // after F1-F3: 80-BF, then two more
	dfaF4                // after F4: 80-8F (nothing above U+10FFFF), then two more
)

// utf8DFA holds, for each byte, the next state of every state, at that state's bit offset. It
// accepts exactly what utf8.Valid accepts (validutf8_test.go checks every short sequence).
var utf8DFA = func() (t [256]uint64) {
	in := func(c, lo, hi int) bool { return lo <= c && c <= hi }
	for c := range 256 {
		next := func(from int) int {
			switch from {
			case dfaAccept:
				switch {
				case c < 0x80:
					return dfaAccept
				case in(c, 0xc2, 0xdf):
					return dfaCont1
				case c == 0xe0:
					return dfaE0
				case c == 0xed:
					return dfaED
				case in(c, 0xe1, 0xef):
					return dfaCont2
				case c == 0xf0:
					return dfaF0
				case in(c, 0xf1, 0xf3):
					return dfaF1
				case c == 0xf4:
					return dfaF4
				}
			case dfaCont1:
				if in(c, 0x80, 0xbf) {
					return dfaAccept
				}
			case dfaCont2:
				if in(c, 0x80, 0xbf) {
					return dfaCont1
				}
			case dfaE0:
				if in(c, 0xa0, 0xbf) {
					return dfaCont1
				}
			case dfaED:
				if in(c, 0x80, 0x9f) {
					return dfaCont1
				}
			case dfaF0:
				if in(c, 0x90, 0xbf) {
					return dfaCont2
				}
			case dfaF1:
				if in(c, 0x80, 0xbf) {
					return dfaCont2
				}
			case dfaF4:
				if in(c, 0x80, 0x8f) {
					return dfaCont2
				}
			}
			return dfaError
		}
		for from := dfaAccept; from <= dfaF4; from += 6 {
			t[c] |= uint64(next(from)) << from
		}
	}
	return t
}()

// asciiShort reports whether b, shorter than 32 bytes, is ASCII, with no loop over bytes.
func asciiShort(b []byte) bool {
	n := len(b)
	switch {
	case n >= 16:
		return (binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[8:])|
			binary.LittleEndian.Uint64(b[n-16:])|binary.LittleEndian.Uint64(b[n-8:]))&hiBits == 0
	case n >= 8:
		return (binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[n-8:]))&hiBits == 0
	case n >= 4:
		return (binary.LittleEndian.Uint32(b)|binary.LittleEndian.Uint32(b[n-4:]))&0x80808080 == 0
	case n > 0:
		return (b[0]|b[n/2]|b[n-1])&0x80 == 0
	}
	return true
}
