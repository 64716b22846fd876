package fastpath

// The tree-based OTLP/JSON transcoder that JSONTranscoder replaced, kept as the reference of
// FuzzJSONStreamEquivalence: it parses the whole body with fastjson, then walks the tree. The
// two must write the same bytes for every body one accepts, and refuse the same bodies. It
// shares the scalar readers that did not change (parseDecimal, jsonNumber, fromHex, putVarint)
// and the schema tables. Its memory grows with the body's token count, which is why it is
// only a test now.

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"unsafe"

	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"
)

// treeMark is a reserved length prefix of the tree transcoder.
type treeMark struct {
	pos int
	n   uint64
}

// treeLenWidth is the room reserved for the length prefix of every nested message and packed run
// while it is written: five varint bytes hold any length below 2^35. The lengths are known
// only once the content is written; compact then squeezes every prefix to its minimal varint
// in one forward pass, so the cost is one move of the output, whatever the nesting depth
// (shifting each message's content as it closes would move deep content once per level).
const treeLenWidth = 5

// treeEntry is a known field of the object being written, with its JSON value.
type treeEntry struct {
	f *jsonField
	v *fastjson.Value
}

// JSONTranscoder turns OTLP/JSON Export requests into the protobuf bytes the pipeline
// carries, walking fastjson's parsed tree against the schema tables (schema.go, jsonschema.go)
// and writing protobuf as it goes: no generated message is built. A reused transcoder does not
// allocate in steady state: the parser, the field stack and the prefix marks keep their
// capacity between calls.
//
// The capacity it keeps grows with the largest body it has parsed (fastjson keeps a copy of
// the body and one value per JSON token); a pool should drop a transcoder after an unusually
// large body rather than keep that memory.
//
// The zero value is ready to use.
type treeTranscoder struct {
	p       fastjson.Parser
	entries []treeEntry // fields of the open objects, innermost last
	marks   []treeMark  // reserved prefixes of this call, in output order
	saved   uint64      // bytes compact will remove from the prefixes closed so far
	scratch []byte      // number text, decoded ids and bytes
	items   int
}

// AppendRequest appends to dst the protobuf encoding of the OTLP/JSON Export request body of
// signal sig, and returns the Scan of the result (resource entries and items, as ScanRequest
// at DepthFull would report). On error it returns dst with its original length (bytes past it
// may have been written) and a zero Scan. It keeps no reference to body or dst.
//
// The mapping is the OTLP/HTTP JSON one: lowerCamelCase keys (proto snake_case names too),
// trace and span ids in hex of any case, bytes in base64, 64-bit integers as numbers or
// decimal strings, enums as integers or value names, doubles as numbers or "NaN",
// "Infinity", "-Infinity". Unknown keys are ignored, null means absent. An object naming one
// field twice, or two members of a oneof, is rejected. The output is what a proto3 writer
// produces for the same message (fields in number order, zero scalars left out, packed
// repeated scalars), except that a negative zero double is kept.
//
// Not safe for concurrent use; reuse one per goroutine (pool it).
func (t *treeTranscoder) AppendRequest(dst []byte, sig Signal, body []byte) ([]byte, Scan, error) {
	if sig >= NumSignals {
		return dst, Scan{}, ErrSignal
	}
	start := len(dst)
	root, err := t.p.ParseBytes(body)
	if err != nil {
		return dst, Scan{}, ErrJSONSyntax
	}
	t.entries = t.entries[:0]
	t.marks = t.marks[:0]
	t.saved = 0
	t.items = 0
	out, s, err := t.request(dst, sig, root)
	if err != nil {
		return dst[:start], Scan{}, err
	}
	out = t.compact(out)
	s.Items = t.items
	return out, s, nil
}

// request writes the entries of the top-level object.
func (t *treeTranscoder) request(dst []byte, sig Signal, root *fastjson.Value) ([]byte, Scan, error) {
	if root.Type() != fastjson.TypeObject {
		return dst, Scan{}, ErrJSONType
	}
	o, _ := root.Object()
	rf := &requestField[sig]
	var entries *fastjson.Value
	var err error
	o.Visit(func(k []byte, v *fastjson.Value) {
		if err != nil || (string(k) != rf.camel && string(k) != rf.name) {
			return
		}
		if entries != nil {
			err = ErrJSONDuplicate
			return
		}
		entries = v
	})
	if err != nil || entries == nil || entries.Type() == fastjson.TypeNull {
		return dst, Scan{}, err
	}
	if entries.Type() != fastjson.TypeArray {
		return dst, Scan{}, ErrJSONType
	}
	arr, _ := entries.Array()
	var s Scan
	for _, e := range arr {
		if e.Type() != fastjson.TypeObject {
			return dst, Scan{}, ErrJSONType
		}
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		mark := t.open(&dst)
		if dst, err = t.message(dst, resourceMsg[sig], e, 1); err != nil {
			return dst, Scan{}, err
		}
		t.close(dst, mark)
		s.Resources++
	}
	return dst, s, nil
}

// message writes the fields of the JSON object v as message m, at nesting level nest.
func (t *treeTranscoder) message(dst []byte, m msgID, v *fastjson.Value, nest int) ([]byte, error) {
	o, _ := v.Object()
	fields := jsonSchema[m]
	base := len(t.entries)
	var seen uint32  // field numbers met, to refuse repeats (OTLP field numbers are below 32)
	var oneofs uint8 // oneof groups already set
	var err error
	o.Visit(func(k []byte, v *fastjson.Value) {
		if err != nil {
			return
		}
		f := lookupJSON(fields, k)
		if f == nil {
			return // unknown: a newer schema may define it
		}
		if seen&(1<<f.num) != 0 {
			err = ErrJSONDuplicate
			return
		}
		seen |= 1 << f.num
		if v.Type() == fastjson.TypeNull {
			return
		}
		if f.oneof != 0 {
			if oneofs&(1<<f.oneof) != 0 {
				err = ErrJSONOneof
				return
			}
			oneofs |= 1 << f.oneof
		}
		t.entries = append(t.entries, treeEntry{f: f, v: v})
	})
	if err != nil {
		t.entries = t.entries[:base]
		return dst, err
	}
	// Keys arrive in any order; protobuf writers emit fields in a fixed one (jsonField.order).
	// Objects hold a few fields, usually already in order, so an insertion sort is the cheapest.
	es := t.entries[base:]
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].f.order < es[j-1].f.order; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	for i := base; i < len(t.entries); i++ {
		e := t.entries[i] // by index: nested objects may grow t.entries
		if dst, err = t.field(dst, m, e.f, e.v, nest); err != nil {
			break
		}
	}
	t.entries = t.entries[:base]
	return dst, err
}

// field writes one known field with a non-null value.
func (t *treeTranscoder) field(dst []byte, m msgID, f *jsonField, v *fastjson.Value, nest int) ([]byte, error) {
	num := protowire.Number(f.num)
	if f.flags&jRepeated == 0 {
		if f.typ == jMessage {
			return t.nested(dst, m, f, v, nest)
		}
		return t.scalar(dst, f, v, true)
	}
	if v.Type() != fastjson.TypeArray {
		return dst, ErrJSONType
	}
	arr, _ := v.Array()
	var err error
	switch f.typ {
	case jMessage:
		for _, e := range arr {
			if dst, err = t.nested(dst, m, f, e, nest); err != nil {
				return dst, err
			}
		}
	case jString:
		for _, e := range arr {
			if dst, err = t.scalar(dst, f, e, true); err != nil {
				return dst, err
			}
		}
	default: // packed scalars; proto3 writes no run for an empty list
		if len(arr) == 0 {
			return dst, nil
		}
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		mark := t.open(&dst)
		for _, e := range arr {
			if dst, err = t.scalar(dst, f, e, false); err != nil {
				return dst, err
			}
		}
		t.close(dst, mark)
	}
	return dst, nil
}

// nested writes one occurrence of a message field.
func (t *treeTranscoder) nested(dst []byte, m msgID, f *jsonField, v *fastjson.Value, nest int) ([]byte, error) {
	if v.Type() != fastjson.TypeObject {
		return dst, ErrJSONType
	}
	if nest >= MaxNesting {
		return dst, ErrNesting
	}
	sf := schema[m][f.num]
	dst = protowire.AppendTag(dst, protowire.Number(f.num), protowire.BytesType)
	mark := t.open(&dst)
	dst, err := t.message(dst, sf.msg, v, nest+1)
	if err != nil {
		return dst, err
	}
	t.close(dst, mark)
	if sf.flags&fItem != 0 {
		t.items++
	}
	return dst, nil
}

// open reserves a length prefix at the end of *dst and returns its mark. While the mark is
// open its n holds t.saved as it was at opening.
func (t *treeTranscoder) open(dst *[]byte) int {
	b := *dst
	t.marks = append(t.marks, treeMark{pos: len(b), n: t.saved})
	*dst = append(b, 0, 0, 0, 0, 0)
	return len(t.marks) - 1
}

// close records the final length of the content after mark: what was written, less what
// compact will take out of the prefixes inside it. Marks are opened in output order and closed
// innermost first, so the prefixes inside this one are exactly those closed since it was
// opened, and what they give back is the growth of t.saved since then.
func (t *treeTranscoder) close(dst []byte, mark int) {
	mk := &t.marks[mark]
	n := uint64(len(dst)-mk.pos-treeLenWidth) - (t.saved - mk.n)
	mk.n = n
	t.saved += treeLenWidth - uint64(protowire.SizeVarint(n))
}

// compact rewrites every reserved prefix as its minimal varint, moving the bytes between them
// forward once.
func (t *treeTranscoder) compact(dst []byte) []byte {
	if len(t.marks) == 0 {
		return dst
	}
	w := t.marks[0].pos
	r := w
	for _, mk := range t.marks {
		w += copy(dst[w:], dst[r:mk.pos])
		w += putVarint(dst[w:], mk.n)
		r = mk.pos + treeLenWidth
	}
	w += copy(dst[w:], dst[r:])
	return dst[:w]
}

// scalar writes one scalar value; with tagged false it writes the bare value, as an element
// of a packed run, which is never left out.
func (t *treeTranscoder) scalar(dst []byte, f *jsonField, v *fastjson.Value, tagged bool) ([]byte, error) {
	num := protowire.Number(f.num)
	keepZero := !tagged || f.flags&jPresence != 0
	switch f.typ {
	case jString, jBytes, jTraceID, jSpanID:
		if v.Type() != fastjson.TypeString {
			return dst, ErrJSONType
		}
		s, _ := v.StringBytes()
		switch f.typ {
		case jString:
			if !validUTF8(s) {
				return dst, ErrJSONUTF8
			}
		case jBytes:
			var err error
			if s, err = t.base64(s); err != nil {
				return dst, err
			}
		case jTraceID, jSpanID:
			var err error
			if s, err = t.hex(s); err != nil {
				return dst, err
			}
			if size := spanIDSize; len(s) != 0 {
				if f.typ == jTraceID {
					size = traceIDSize
				}
				if len(s) != size {
					return dst, ErrIDLength
				}
			}
		}
		if len(s) == 0 && !keepZero && f.flags&jRepeated == 0 {
			return dst, nil
		}
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(len(s)))
		return append(dst, s...), nil
	case jBool:
		var x uint64
		switch v.Type() {
		case fastjson.TypeTrue:
			x = 1
		case fastjson.TypeFalse:
		default:
			return dst, ErrJSONType
		}
		if x == 0 && !keepZero {
			return dst, nil
		}
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.VarintType)
		}
		return append(dst, byte(x)), nil
	case jDouble:
		x, err := t.double(v)
		if err != nil {
			return dst, err
		}
		bits := math.Float64bits(x)
		if bits == 0 && !keepZero {
			return dst, nil
		}
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
		}
		return binary.LittleEndian.AppendUint64(dst, bits), nil
	}
	x, err := t.integer(f, v)
	if err != nil {
		return dst, err
	}
	if x == 0 && !keepZero {
		return dst, nil
	}
	switch f.typ {
	case jFixed32:
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.Fixed32Type)
		}
		return binary.LittleEndian.AppendUint32(dst, uint32(x)), nil
	case jFixed64, jSfixed64:
		if tagged {
			dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
		}
		return binary.LittleEndian.AppendUint64(dst, x), nil
	}
	if tagged {
		dst = protowire.AppendTag(dst, num, protowire.VarintType)
	}
	return protowire.AppendVarint(dst, x), nil
}

// integer reads an integer field's JSON value (a number or a decimal string; for an enum also
// a value name) and returns it as the varint or fixed value the wire carries.
func (t *treeTranscoder) integer(f *jsonField, v *fastjson.Value) (uint64, error) {
	var text []byte
	switch v.Type() {
	case fastjson.TypeNumber:
		t.scratch = v.MarshalTo(t.scratch[:0])
		text = t.scratch
	case fastjson.TypeString:
		text, _ = v.StringBytes()
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

// double reads a double: a JSON number, or a string holding one or "NaN", "Infinity",
// "-Infinity".
func (t *treeTranscoder) double(v *fastjson.Value) (float64, error) {
	var text []byte
	switch v.Type() {
	case fastjson.TypeNumber:
		t.scratch = v.MarshalTo(t.scratch[:0])
		text = t.scratch
	case fastjson.TypeString:
		text, _ = v.StringBytes()
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

// hex decodes a trace or span id into t.scratch. Any case is accepted, as the specification
// asks; an empty string is an absent id.
func (t *treeTranscoder) hex(s []byte) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, ErrJSONHex
	}
	out := t.scratch[:0]
	for i := 0; i < len(s); i += 2 {
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return nil, ErrJSONHex
		}
		out = append(out, hi<<4|lo)
	}
	t.scratch = out
	return out, nil
}

// base64 decodes a bytes value into t.scratch. Like protobuf's JSON readers it takes the
// standard or the URL alphabet, with or without padding.
func (t *treeTranscoder) base64(s []byte) ([]byte, error) {
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
	n := enc.DecodedLen(len(s))
	if cap(t.scratch) < n {
		t.scratch = make([]byte, n)
	}
	out := t.scratch[:n]
	n, err := enc.Decode(out, s)
	if err != nil {
		return nil, ErrJSONBase64
	}
	return out[:n], nil
}

// lookupJSON finds the field of message m a JSON key names, by either name, or nil: the
// linear search the tree transcoder did, kept here as the reference of jsonKeyTable.
func lookupJSON(fields []jsonField, key []byte) *jsonField {
	if len(key) == 0 {
		return nil
	}
	for i := range fields {
		f := &fields[i]
		// Both names start with the same letter: comparing it first passes over most fields
		// without comparing strings.
		if f.name[0] != key[0] {
			continue
		}
		if string(key) == f.camel || string(key) == f.name {
			return f
		}
	}
	return nil
}
