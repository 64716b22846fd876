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
func (t *JSONTranscoder) scalar(dst []byte, i int, f *jsonField, tagged bool) ([]byte, int, error) {
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
	switch f.typ {
	case jFixed32:
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.Fixed32Type)
		}
		return binary.LittleEndian.AppendUint32(dst, uint32(x)), next, nil
	case jFixed64, jSfixed64:
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
		}
		return binary.LittleEndian.AppendUint64(dst, x), next, nil
	}
	if tagged {
		dst = protowire.AppendTag(dst, num, protowire.VarintType)
	}
	return protowire.AppendVarint(dst, x), next, nil
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
	for i := 0; i < len(s); i += 2 {
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return dst, ErrJSONHex
		}
		dst = append(dst, hi<<4|lo)
	}
	return dst, nil
}

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
