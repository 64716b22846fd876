package fastpath

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// scalar writes the scalar value at b[i] of field f; with tagged false it writes the bare
// value, as an element of a packed run, which is never left out. It returns the index after
// the value.
//
// The values SDKs write most (strings without escapes, ids, times as decimal strings, small
// integers) take a short path here; whatever it does not take, errors included, goes the
// general way (scalarToken), which decides alike.
func (t *JSONTranscoder) scalar(dst []byte, i int, f *jsonField, tagged bool) ([]byte, int, error) {
	b := t.in
	if c := b[i]; c == '"' {
		switch f.typ {
		case jString:
			e, esc, high, ok := scanString(b, i+1)
			if !ok || esc {
				break
			}
			s := b[i+1 : e]
			if len(s) == 0 && tagged && f.flags&(jPresence|jRepeated) == 0 {
				return dst, e + 1, nil // proto3 leaves an empty string out
			}
			if high && !validUTF8(s) {
				return dst, i, ErrJSONUTF8
			}
			if cap(dst)-len(dst) < len(s)+jsonRoom {
				var err error
				if dst, err = t.more(dst, len(s)+jsonRoom); err != nil {
					return dst, i, err
				}
			}
			dst = f.appendTag(dst) // strings are never packed
			dst = appendVarint(dst, uint64(len(s)))
			return append(dst, s...), e + 1, nil
		case jTraceID, jSpanID:
			size := spanIDSize
			if f.typ == jTraceID {
				size = traceIDSize
			}
			// Only an id of the right size: an empty one is left out, any other refused.
			if e := i + 1 + 2*size; tagged && e < len(b) && b[e] == '"' {
				start := len(dst)
				dst = append(f.appendTag(dst), byte(size))
				if dst, ok := appendHex(dst, b[i+1:e]); ok {
					return dst, e + 1, nil
				}
				dst = dst[:start] // a quote or backslash among the digits too: decided below
			}
		case jFixed64, jUint64, jInt64, jSfixed64:
			// Times and 64-bit counts, which the mapping writes as decimal strings.
			if x, n := decimalPrefix(b[i+1:]); n > 0 && i+1+n < len(b) && b[i+1+n] == '"' && x != 0 {
				if f.typ == jUint64 || f.typ == jFixed64 || x <= math.MaxInt64 {
					return t.appendInt(dst, f, x, tagged), i + n + 2, nil
				}
			}
		}
	} else if c >= '1' && c <= '9' {
		switch f.typ {
		case jFixed64, jUint64, jInt64, jSfixed64, jEnum, jInt32, jUint32, jFixed32:
			// A positive integer that the general way would also take: digits only, ended by a
			// byte that no number token runs over, and in range.
			x, n := decimalPrefix(b[i:])
			e := i + n
			if e < len(b) && !numberChar(b[e]) && x <= f.typ.maxPositive() {
				return t.appendInt(dst, f, x, tagged), e, nil
			}
		}
	}
	return t.scalarToken(dst, i, f, tagged)
}

// maxPositive is the largest positive integer a field of integer type t takes.
func (t jsonType) maxPositive() uint64 {
	switch t {
	case jEnum, jInt32, jSint32:
		return math.MaxInt32
	case jUint32, jFixed32:
		return math.MaxUint32
	case jInt64, jSfixed64:
		return math.MaxInt64
	}
	return math.MaxUint64
}

// decimalPrefix reads the decimal digits at the start of b, at most 19 of them, so that their
// value cannot overflow; n is how many it read. A 20th digit is left for the caller to see.
// Runs of eight digits (a time in nanoseconds is 19) are read a word at a time.
func decimalPrefix(b []byte) (x uint64, n int) {
	for n+8 <= 16 && n+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[n:])
		if !eightDigits(w) {
			break
		}
		x = x*1e8 + eightDigitsValue(w)
		n += 8
	}
	for n < len(b) && n < 19 {
		d := b[n] - '0'
		if d > 9 {
			break
		}
		x = x*10 + uint64(d)
		n++
	}
	return x, n
}

// eightDigits reports whether all eight bytes of w are ASCII digits: each has 3 as its high
// nibble, and adding 6 leaves it so (no low nibble above 9).
func eightDigits(w uint64) bool {
	return (w&0xf0f0f0f0f0f0f0f0)|((w+0x0606060606060606)&0xf0f0f0f0f0f0f0f0)>>4 == 0x3333333333333333
}

// eightDigitsValue is the value of the eight digits in w, the first in its low byte: pairs of
// digits, then of pairs, then of fours, combined by multiplications that work on all lanes at
// once.
func eightDigitsValue(w uint64) uint64 {
	w -= 0x3030303030303030
	w = w*10 + w>>8 // each even byte: a two-digit number
	return ((w&0x000000ff000000ff)*(100+1000000<<32) + (w>>16&0x000000ff000000ff)*(1+10000<<32)) >> 32
}

// appendInt writes the integer x of field f, as the wire carries it (x is already
// zigzag-encoded or sign-extended where the type asks); tagged as in scalar.
func (t *JSONTranscoder) appendInt(dst []byte, f *jsonField, x uint64, tagged bool) []byte {
	switch f.typ {
	case jFixed32:
		if tagged {
			dst = f.appendTag(dst)
		}
		return binary.LittleEndian.AppendUint32(dst, uint32(x))
	case jFixed64, jSfixed64:
		if tagged {
			dst = f.appendTag(dst)
		}
		return binary.LittleEndian.AppendUint64(dst, x)
	}
	if tagged {
		dst = f.appendTag(dst)
	}
	return appendVarint(dst, x)
}

// scalarToken is scalar for any value: it reads the token, then checks it against f's type.
func (t *JSONTranscoder) scalarToken(dst []byte, i int, f *jsonField, tagged bool) ([]byte, int, error) {
	tok, next, err := token(t.in, i)
	if err != nil {
		return dst, i, err
	}
	num := protowire.Number(f.num)
	keepZero := !tagged || f.flags&jPresence != 0
	switch f.typ {
	case jString, jBytes, jTraceID, jSpanID:
		if tok.kind != jkString {
			return dst, i, ErrJSONType
		}
		// Repeated strings keep their empty elements: each is a value of the list.
		keepEmpty := keepZero || f.flags&jRepeated != 0
		// Unescaped, decoded from base64 or hex, the value is no longer than its text.
		if cap(dst)-len(dst) < len(tok.text)+jsonRoom {
			if dst, err = t.more(dst, len(tok.text)+jsonRoom); err != nil {
				return dst, i, err
			}
		}
		start := len(dst)
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		switch f.typ {
		case jString:
			dst, err = appendString(dst, tok)
		case jBytes:
			dst, err = appendBase64(dst, t.text(tok))
		default:
			dst, err = appendHexID(dst, t.text(tok))
			// The scan's rule (ErrIDLength): an id of another size would cost the batch it
			// joins, since the Collector's decoder refuses it.
			size := spanIDSize
			if f.typ == jTraceID {
				size = traceIDSize
			}
			if n := len(dst) - start - protowire.SizeTag(num) - 1; err == nil && n != 0 && n != size {
				err = ErrIDLength
			}
		}
		if err != nil {
			return dst, i, err
		}
		if len(dst) == start+protowire.SizeTag(num)+1 && !keepEmpty {
			return dst[:start], next, nil // the length byte says 0: proto3 leaves it out
		}
		return dst, next, nil
	case jBool:
		var x byte
		switch tok.kind {
		case jkTrue:
			x = 1
		case jkFalse:
		default:
			return dst, i, ErrJSONType
		}
		if x == 0 && !keepZero {
			return dst, next, nil
		}
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.VarintType)
		}
		return append(dst, x), next, nil
	case jDouble:
		x, err := t.double(tok)
		if err != nil {
			return dst, i, err
		}
		bits := math.Float64bits(x)
		if bits == 0 && !keepZero {
			return dst, next, nil
		}
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
		}
		return binary.LittleEndian.AppendUint64(dst, bits), next, nil
	}
	x, err := t.integer(f, tok)
	if err != nil {
		return dst, i, err
	}
	if x == 0 && !keepZero {
		return dst, next, nil
	}
	return t.appendInt(dst, f, x, tagged), next, nil
}

// text returns a string token's content unescaped: the body's bytes when it has no escapes,
// else a copy in t.scratch, valid until the next call of text.
func (t *JSONTranscoder) text(tok jsonToken) []byte {
	if !tok.esc {
		return tok.text
	}
	t.scratch = appendUnescaped(t.scratch[:0], tok.text)
	return t.scratch
}

// appendString appends a string field's length and content, unescaped straight into dst.
func appendString(dst []byte, tok jsonToken) ([]byte, error) {
	if !tok.esc {
		if !validUTF8(tok.text) {
			return dst, ErrJSONUTF8
		}
		dst = protowire.AppendVarint(dst, uint64(len(tok.text)))
		return append(dst, tok.text...), nil
	}
	// Unescaping only shrinks: room for the raw length's prefix is enough, and the prefix
	// narrows afterwards if the content did.
	k := protowire.SizeVarint(uint64(len(tok.text)))
	p := len(dst)
	dst = appendUnescaped(append(dst, make([]byte, k)...), tok.text)
	s := dst[p+k:]
	if !validUTF8(s) {
		return dst, ErrJSONUTF8
	}
	return putLen(dst, p, k, len(s)), nil
}

// putLen writes the length n of the content that follows a k-byte gap at dst[p:], narrowing
// the gap to the length's own size.
func putLen(dst []byte, p, k, n int) []byte {
	w := protowire.SizeVarint(uint64(n))
	if w < k {
		copy(dst[p+w:], dst[p+k:])
		dst = dst[:len(dst)-(k-w)]
	}
	putVarint(dst[p:], uint64(n))
	return dst
}

// appendHexID appends the length and bytes of a trace or span id written in hex. Any case is
// accepted, as the specification asks; an empty string is an absent id.
func appendHexID(dst, s []byte) ([]byte, error) {
	if len(s)%2 != 0 {
		return dst, ErrJSONHex
	}
	dst = protowire.AppendVarint(dst, uint64(len(s)/2))
	dst, ok := appendHex(dst, s)
	if !ok {
		return dst, ErrJSONHex
	}
	return dst, nil
}

// appendHex appends the bytes the even number of hex digits s spells, or reports false when s
// holds anything else (dst may then have grown).
func appendHex(dst, s []byte) ([]byte, bool) {
	var bad byte
	for i := 0; i+1 < len(s); i += 2 {
		hi, lo := hexValue[s[i]], hexValue[s[i+1]]
		bad |= hi | lo
		dst = append(dst, hi<<4|lo)
	}
	return dst, bad&0xf0 == 0
}

// hexValue maps a hex digit of either case to its value and every other byte to 0xff, so that
// one OR over a run of digits tells whether they all were digits.
var hexValue = func() (t [256]byte) {
	for c := range t {
		d, ok := fromHex(byte(c))
		if !ok {
			d = 0xff
		}
		t[c] = d
	}
	return t
}()

func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendBase64 appends the length and decoded bytes of a bytes value. Like protobuf's JSON
// readers it takes the standard or the URL alphabet, with or without padding.
func appendBase64(dst, s []byte) ([]byte, error) {
	url := false
	for _, c := range s {
		if c == '-' || c == '_' {
			url = true
			break
		}
	}
	raw := len(s)%4 != 0
	var enc *base64.Encoding
	switch {
	case url && raw:
		enc = base64.RawURLEncoding
	case url:
		enc = base64.URLEncoding
	case raw:
		enc = base64.RawStdEncoding
	default:
		enc = base64.StdEncoding
	}
	m := enc.DecodedLen(len(s)) // at least the decoded length
	k := protowire.SizeVarint(uint64(m))
	p := len(dst)
	dst = slices.Grow(dst, k+m)[:p+k+m]
	n, err := enc.Decode(dst[p+k:], s)
	if err != nil {
		return dst[:p], ErrJSONBase64
	}
	return putLen(dst[:p+k+n], p, k, n), nil
}

// appendVarint is protowire.AppendVarint with the one-byte case, which is most lengths and
// values the transcoder writes, inlined at the caller.
func appendVarint(dst []byte, v uint64) []byte {
	if v < 0x80 {
		return append(dst, byte(v))
	}
	return protowire.AppendVarint(dst, v)
}

// putVarint writes v at the start of b, which has room, and returns its size.
func putVarint(b []byte, v uint64) int {
	i := 0
	for v >= 0x80 {
		b[i] = byte(v) | 0x80
		v >>= 7
		i++
	}
	b[i] = byte(v)
	return i + 1
}

// integer reads an integer field's value (a number or a decimal string; for an enum also a
// value name) and returns it as the varint or fixed value the wire carries.
func (t *JSONTranscoder) integer(f *jsonField, tok jsonToken) (uint64, error) {
	var text []byte
	switch tok.kind {
	case jkNumber:
		text = tok.text
	case jkString:
		text = t.text(tok)
		if f.typ == jEnum && len(text) > 0 && (text[0] < '0' || text[0] > '9') && text[0] != '-' {
			for i, name := range enumNames[f.enum] {
				if string(text) == name {
					return uint64(i), nil
				}
			}
			return 0, ErrJSONEnum
		}
	default:
		return 0, ErrJSONType
	}
	neg, mag, ok := parseDecimal(text)
	if !ok {
		return 0, ErrJSONNumber
	}
	switch f.typ {
	case jUint32, jFixed32:
		if neg || mag > math.MaxUint32 {
			return 0, ErrJSONNumber
		}
		return mag, nil
	case jUint64, jFixed64:
		if neg {
			return 0, ErrJSONNumber
		}
		return mag, nil
	case jInt32, jEnum, jSint32:
		if (!neg && mag > math.MaxInt32) || (neg && mag > -math.MinInt32) {
			return 0, ErrJSONNumber
		}
		x := int32(mag)
		if neg {
			x = int32(-int64(mag))
		}
		if f.typ == jSint32 {
			return uint64(uint32(x<<1) ^ uint32(x>>31)), nil
		}
		return uint64(int64(x)), nil // negative int32 is sign-extended to ten bytes
	case jInt64, jSfixed64:
		if (!neg && mag > math.MaxInt64) || (neg && mag > 1<<63) {
			return 0, ErrJSONNumber
		}
		if neg {
			return -mag, nil
		}
		return mag, nil
	}
	panic("BUG: fastpath JSON schema has an unhandled integer type")
}

// parseDecimal reads an optionally negative run of decimal digits, refusing anything else
// (signs, fractions, exponents, spaces) and magnitudes above 2^64-1.
func parseDecimal(b []byte) (neg bool, mag uint64, ok bool) {
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 {
		return false, 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false, 0, false
		}
		d := uint64(c - '0')
		if mag > (math.MaxUint64-d)/10 {
			return false, 0, false
		}
		mag = mag*10 + d
	}
	return neg, mag, true
}

// double reads a double: a JSON number, or a string holding one or "NaN", "Infinity",
// "-Infinity".
func (t *JSONTranscoder) double(tok jsonToken) (float64, error) {
	var text []byte
	switch tok.kind {
	case jkNumber:
		text = tok.text
	case jkString:
		text = t.text(tok)
		switch string(text) {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	default:
		return 0, ErrJSONType
	}
	if !jsonNumber(text) {
		return 0, ErrJSONNumber
	}
	// The text is only read during the call; the conversion avoids copying it. strconv keeps a
	// copy of it in a range error, never the string itself.
	x, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(text), len(text)), 64)
	if err != nil {
		return 0, ErrJSONNumber // out of range: protobuf's JSON mapping refuses to round to ±Inf
	}
	return x, nil
}

// jsonNumber checks the JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
// The tokenizer is laxer (it passes "inf", "nan", "1-2" as number tokens), and strconv laxer
// still (hex, "Inf").
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
