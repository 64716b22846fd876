package fastpath

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Attributes are most of what a span, a data point or a log record holds: two thirds of the
// members of an SDK's OTLP/JSON body are an attribute's key, its value, and the value's one
// member. Every writer spells them the same way, key first and no whitespace:
//
//	{"key":"http.request.method","value":{"stringValue":"GET"}}
//	{"key":"server.port","value":{"intValue":443}}  (or "443", as protojson writes it)
//	{"key":"error","value":{"boolValue":true}}
//
// attribute reads an attribute spelled exactly so with a handful of comparisons and writes
// its protobuf at once, its lengths known before its bytes. Anything else (whitespace, keys
// in another order, escapes, a double, an array, an empty key, bytes outside ASCII that are
// not UTF-8) it leaves to the general reader, which decides on it as on every other object.

// The fixed parts of an attribute as SDKs write it.
const (
	attrOpen   = `{"key":"`
	attrValue  = `","value":{"`
	attrString = `stringValue":"`
	attrInt    = `intValue":`
	attrTrue   = `boolValue":true`
	attrFalse  = `boolValue":false`
	attrClose  = `}}`
)

// jsonLit is a literal of 8 to 16 bytes as two words that overlap when it is shorter than 16,
// so that finding it takes two loads and two comparisons rather than a call to memequal.
type jsonLit struct {
	lo, hi uint64 // its first and last eight bytes
	n      int
}

func newLit(s string) jsonLit {
	if len(s) < 8 || len(s) > 16 {
		panic("BUG: fastpath JSON literal not of 8 to 16 bytes")
	}
	return jsonLit{binary.LittleEndian.Uint64([]byte(s)), binary.LittleEndian.Uint64([]byte(s[len(s)-8:])), len(s)}
}

// at reports whether b holds the literal at i.
func (l *jsonLit) at(b []byte, i int) bool {
	return i >= 0 && len(b)-i >= l.n &&
		binary.LittleEndian.Uint64(b[i:]) == l.lo && binary.LittleEndian.Uint64(b[i+l.n-8:]) == l.hi
}

var (
	litOpen   = newLit(attrOpen)
	litValue  = newLit(attrValue)
	litString = newLit(attrString)
	litInt    = newLit(attrInt)
	litTrue   = newLit(attrTrue)
	litFalse  = newLit(attrFalse)
)

// The protobuf tags of the members attribute writes: KeyValue's key and value, and the
// AnyValue members it reads.
const (
	tagKey         = 1<<3 | byte(protowire.BytesType)
	tagValue       = 2<<3 | byte(protowire.BytesType)
	tagStringValue = 1<<3 | byte(protowire.BytesType)
	tagBoolValue   = 2<<3 | byte(protowire.VarintType)
	tagIntValue    = 3<<3 | byte(protowire.VarintType)
)

// attribute writes the attribute at b[i] (a KeyValue of field f) when it is spelled as above,
// and reports false, having written nothing, when it is not.
func (t *JSONTranscoder) attribute(dst []byte, i int, f *jsonField) ([]byte, int, bool) {
	b := t.in
	if !litOpen.at(b, i) {
		return dst, i, false
	}
	ks := i + len(attrOpen)
	ke, esc, high, ok := scanString(b, ks)
	if !ok || esc || ke == ks || high && !validUTF8(b[ks:ke]) {
		return dst, i, false
	}
	j := ke
	if !litValue.at(b, j) {
		return dst, i, false
	}
	j += len(attrValue)

	var (
		tag    byte
		vs, ve int    // a string value: b[vs:ve]
		x      uint64 // an int or bool value
	)
	switch {
	case litString.at(b, j):
		tag, vs = tagStringValue, j+len(attrString)
		ve, esc, high, ok = scanString(b, vs)
		if !ok || esc || high && !validUTF8(b[vs:ve]) {
			return dst, i, false
		}
		j = ve + 1
	case litInt.at(b, j):
		tag, j = tagIntValue, j+len(attrInt)
		quoted := j < len(b) && b[j] == '"'
		if quoted {
			j++
		}
		var n int
		x, n = decimalPrefix(b[j:])
		j += n
		switch {
		case n == 0 || x > math.MaxInt64 || j >= len(b):
			return dst, i, false
		case quoted && b[j] != '"', !quoted && numberChar(b[j]):
			return dst, i, false // a sign, a fraction, an exponent, more digits
		case quoted:
			j++
		}
	case litTrue.at(b, j):
		tag, x, j = tagBoolValue, 1, j+len(attrTrue)
	case litFalse.at(b, j):
		tag, j = tagBoolValue, j+len(attrFalse)
	default:
		return dst, i, false
	}
	if !bytesAt(b, j, attrClose) {
		return dst, i, false
	}
	j += len(attrClose)

	// What it writes is shorter than its text (b[i:j]); without room for it, the general
	// way asks again and fails as it does.
	if cap(dst)-len(dst) < j-i+jsonRoom {
		out, err := t.more(dst, j-i+jsonRoom)
		if err != nil {
			return dst, i, false
		}
		dst = out
	}
	// The AnyValue's one member, then the KeyValue, sized from the inside out.
	kl, vl := uint64(ke-ks), uint64(ve-vs)
	anyLen := 1 + uint64(protowire.SizeVarint(x))
	if tag == tagStringValue {
		anyLen = 1 + uint64(protowire.SizeVarint(vl)) + vl
	}
	kvLen := 1 + uint64(protowire.SizeVarint(kl)) + kl + 1 + uint64(protowire.SizeVarint(anyLen)) + anyLen
	dst = f.appendTag(dst)
	dst = appendVarint(dst, kvLen)
	dst = append(dst, tagKey)
	dst = appendVarint(dst, kl)
	dst = append(dst, b[ks:ke]...)
	dst = append(dst, tagValue)
	dst = appendVarint(dst, anyLen)
	dst = append(dst, tag)
	if tag == tagStringValue {
		dst = appendVarint(dst, vl)
		dst = append(dst, b[vs:ve]...)
	} else {
		dst = appendVarint(dst, x)
	}
	return dst, j, true
}
