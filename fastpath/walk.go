package fastpath

import (
	"encoding/binary"
	"math/bits"

	"google.golang.org/protobuf/encoding/protowire"
)

// The per-message walkers of DepthResource and DepthFull are generated from the schema table
// into walk_gen.go; this file holds what they call off their fast paths. Each helper takes the
// message and the offset of a value in it and returns the offset past it, so that a walker
// keeps one slice and one index instead of re-slicing at every field.

//go:generate go test -run ^TestWalkersGenerated$ -gen .

// readTag reads a tag at b[i] that is not a one-byte tag of a valid field number.
func readTag(b []byte, i int) (tag uint64, next int, err error) {
	num, typ, n, err := consumeTag(b[i:])
	if err != nil {
		return 0, 0, err
	}
	return uint64(num)<<3 | uint64(typ), i + n, nil
}

// skipVarint skips a varint of two bytes or more at b[i]. One of up to eight bytes is found
// in a word by its first byte without the high bit, with no branch on its length.
func skipVarint(b []byte, i int) (int, error) {
	if len(b)-i >= 8 {
		if end := ^binary.LittleEndian.Uint64(b[i:]) & hiBits; end != 0 {
			return i + bits.TrailingZeros64(end)/8 + 1, nil
		}
	}
	_, n := protowire.ConsumeVarint(b[i:])
	if n < 0 {
		return 0, varintErr(n)
	}
	return i + n, nil
}

// readLen reads the length prefix at b[i]: the payload is b[s:e]. Two-byte lengths, those of
// most spans, data points and log records, are read here; the rest goes through protowire.
func readLen(b []byte, i int) (s, e int, err error) {
	if len(b)-i >= 2 && b[i] >= 0x80 && b[i+1] < 0x80 {
		if l := int(b[i]&0x7f) | int(b[i+1])<<7; l <= len(b)-i-2 {
			return i + 2, i + 2 + l, nil
		}
	}
	p, n, err := consumeLen(b[i:])
	if err != nil {
		return 0, 0, err
	}
	return i + p, i + n, nil
}

// skipLen skips a length-delimited value at b[i].
func skipLen(b []byte, i int) (int, error) {
	_, n, err := consumeLen(b[i:])
	if err != nil {
		return 0, err
	}
	return i + n, nil
}

// skipField skips the value of an unknown field of wire type tag&7 at b[i].
func skipField(b []byte, i int, tag uint64) (int, error) {
	n, err := skipValue(b[i:], protowire.Type(tag&7))
	if err != nil {
		return 0, err
	}
	return i + n, nil
}

// packedVarints checks a packed run of varints, which must end exactly at the end of its last
// element.
func packedVarints(run []byte) error {
	for len(run) > 0 {
		_, n := protowire.ConsumeVarint(run)
		if n < 0 {
			if err := varintErr(n); err != ErrTruncated {
				return err
			}
			return ErrPacked
		}
		run = run[n:]
	}
	return nil
}

const hiBits = 0x8080808080808080

// validUTF8 is utf8.Valid, faster on the strings OTLP carries. Nearly all are ASCII and short:
// they are checked in whole words, the last one overlapping the one before rather than ending
// in a loop over bytes. Text outside ASCII runs through a shift-based automaton (utf8DFA), one
// table load and one shift per byte, in two independent halves for long strings so that the
// two chains of shifts overlap in the pipeline.
func validUTF8(b []byte) bool {
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

// asciiTail reports whether the string b[s:e] of a message b is known to be ASCII. A string of
// up to 64 bytes, nearly every one in OTLP, is tested in the 64 bytes of b that end with it,
// each word masked to the string's own bytes by a table row: no branch depends on the length,
// which varies from string to string and would be mispredicted about every other time. The
// bytes before the string are the tag, the length and earlier fields of b, which starts at its
// resource entry: only strings ending in an entry's first 64 bytes are not tested. false means
// "not known", and validUTF8 decides. A leaf, so that its call needs no stack check.
func asciiTail(b []byte, s, e int) bool {
	n := e - s
	if n > 64 || e < 64 {
		return false
	}
	w := b[e-64 : e]
	m := &tailMasks[n]
	return (binary.LittleEndian.Uint64(w[0:])&m[0]|
		binary.LittleEndian.Uint64(w[8:])&m[1]|
		binary.LittleEndian.Uint64(w[16:])&m[2]|
		binary.LittleEndian.Uint64(w[24:])&m[3]|
		binary.LittleEndian.Uint64(w[32:])&m[4]|
		binary.LittleEndian.Uint64(w[40:])&m[5]|
		binary.LittleEndian.Uint64(w[48:])&m[6]|
		binary.LittleEndian.Uint64(w[56:])&m[7])&hiBits == 0
}

// tailMasks[n] selects the last n of 64 bytes, word by word.
var tailMasks = func() (t [65][8]uint64) {
	for n := range t {
		for k := 64 - n; k < 64; k++ {
			t[n][k/8] |= 0xff << (8 * (k % 8))
		}
	}
	return t
}()

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
