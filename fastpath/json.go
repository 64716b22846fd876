package fastpath

import (
	"errors"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Errors of the OTLP/JSON transcoder. Pre-made, so that a rejected body costs no allocation.
// A body with several faults is refused for the first one met reading it from the start.
var (
	// ErrJSONSyntax: the body is not one well-formed JSON value, or its values nest deeper
	// than maxJSONDepth (300).
	ErrJSONSyntax = errors.New("fastpath: body is not well-formed JSON")
	// ErrJSONType: a known field holds a JSON type its protobuf type cannot take (an object
	// where a string belongs, a null inside an array, a request that is not an object).
	ErrJSONType = errors.New("fastpath: JSON value has the wrong type for its field")
	// ErrJSONNumber: an integer field holds something other than a decimal integer in range,
	// or a double holds something other than a number, "NaN", "Infinity" or "-Infinity".
	ErrJSONNumber = errors.New("fastpath: JSON number is malformed or out of range")
	// ErrJSONHex: a trace or span id is not an even number of hex digits.
	ErrJSONHex = errors.New("fastpath: trace or span id is not hex")
	// ErrJSONBase64: a bytes value is not base64.
	ErrJSONBase64 = errors.New("fastpath: bytes value is not base64")
	// ErrJSONEnum: an enum field holds a name its enum does not define.
	ErrJSONEnum = errors.New("fastpath: unknown enum value name")
	// ErrJSONUTF8: a string value is not valid UTF-8.
	ErrJSONUTF8 = errors.New("fastpath: JSON string is not valid UTF-8")
	// ErrJSONDuplicate: an object names the same field twice (also under its two names, e.g.
	// "traceId" and "trace_id").
	ErrJSONDuplicate = errors.New("fastpath: JSON object repeats a field")
	// ErrJSONOneof: an object sets two members of one oneof (two AnyValue kinds, two metric
	// types, asInt and asDouble).
	ErrJSONOneof = errors.New("fastpath: JSON object sets two members of a oneof")
)

// Bounds on what a transcoder keeps between calls; past them the capacity a large body grew
// is dropped, so that a pooled transcoder holds a few KiB whatever it served.
const (
	keepMarks   = 1 << 10 // deferred prefixes: one per message larger than eagerMax
	keepScratch = 64 << 10
)

// JSONTranscoder turns OTLP/JSON Export requests into the protobuf bytes the pipeline
// carries. It reads the body once, front to back, as a stream of JSON tokens checked against
// the schema tables (schema.go, jsonschema.go), and writes protobuf into the caller's buffer as
// it goes: no tree of the body and no generated message is built. Besides the output, a call
// holds state proportional to how deeply the body nests (one frame per open message, bounded
// by MaxNesting; the values of unknown keys are passed over with one bit per level, bounded by
// maxJSONDepth), a 16-byte mark per message larger than eagerMax, and the unescaped text of
// one id, bytes or number value when it was written with escapes. jsonlen.go explains the
// length prefixes and the field order.
//
// What SDKs write most takes short paths that decide exactly as the general reader does and
// hand it whatever they are not sure of: a key is compared first, in place, with the one that
// followed the previous key the last time (hints); an attribute spelled as every writer
// spells it is read with a few word comparisons (jsonattr.go); strings are scanned eight bytes
// a step, and plain strings, hex ids, decimal times and small integers are read without the
// general token reader.
//
// A reused transcoder does not allocate in steady state; besides its fixed arrays (about
// 4 KiB: the hints and the reorder buffer) it keeps at most keepMarks marks and keepScratch
// bytes of scratch between calls, so a pool may keep it whatever body it served.
//
// The zero value is ready to use.
type JSONTranscoder struct {
	in      []byte    // the body of the call under way; nil between calls
	grower  Grower    // what gives the output of the call under way more room; nil: append
	segs    []jsonSeg // fields written by the open objects, the innermost object's last
	marks   []lenMark // deferred length prefixes of this call, in output order
	grown   uint64    // bytes expand will add for the marks closed so far
	scratch []byte    // unescaped text of an id, bytes or number value
	items   int
	key     [keyMax]byte   // an escaped key, unescaped
	tmp     [eagerMax]byte // small objects reordered, large ones rotated through it
	// hints[m][k] is the name of message m's fields (see jsonKeyTable.find) that followed
	// name k the last time, k 0 standing for an object's start: the key to compare first.
	hints [numMsgs][maxNames]uint8
}

// keyMax bounds the escaped keys that are unescaped to be looked up: an escape shrinks to no
// less than a sixth of its length (\uXXXX to one byte), and no field name is longer than 24
// bytes, so a longer escaped key names no field.
const keyMax = 6 * maxKeyLen

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
func (t *JSONTranscoder) AppendRequest(dst []byte, sig Signal, body []byte) ([]byte, Scan, error) {
	return t.AppendRequestWithin(nil, dst, sig, body)
}

// Grower gives the transcoder's output more room than its buffer has, for a caller that
// charges what the output takes to a budget: packed numbers write up to four times their JSON
// text ("0," is a fixed64's eight bytes), so the output, not the body, is what must be
// bounded.
type Grower interface {
	// Grow returns a buffer holding dst's bytes with room for at least n more, whose memory
	// was charged before it was made; dst's buffer is the grower's again (the transcoder
	// reads it no more). An error (ErrBudget, or a bound of the grower's own) ends the
	// transcoding, which returns it.
	Grow(dst []byte, n int) ([]byte, error)
}

// jsonRoom is the room the transcoder makes sure of before each member, element and resource
// entry it writes: enough for what it writes between two such points besides a value's text
// (tags, reserved length bytes, up to two bytes per enclosing message as they close, at most
// MaxNesting of them). A string, bytes or id value, and an attribute, make sure of room for
// their text beside it.
const jsonRoom = 2*MaxNesting + 64

// AppendRequestWithin is AppendRequest with the output's growth left to g (nil: to append): it
// asks g before it writes past dst's capacity, so that nothing it writes grows a buffer g did
// not give. On error, g's among them, the returned slice (of the last buffer g gave) has
// dst's original length.
func (t *JSONTranscoder) AppendRequestWithin(g Grower, dst []byte, sig Signal, body []byte) ([]byte, Scan, error) {
	if sig >= NumSignals {
		return dst, Scan{}, ErrSignal
	}
	start := len(dst)
	t.in, t.grower = body, g
	t.segs = t.segs[:0]
	t.marks = t.marks[:0]
	t.grown = 0
	t.items = 0
	out, s, err := t.request(dst, sig)
	if err == nil {
		out, err = t.expand(out)
		s.Items = t.items
	}
	t.in, t.grower = nil, nil
	if cap(t.marks) > keepMarks {
		t.marks = nil
	}
	if cap(t.scratch) > keepScratch {
		t.scratch = nil
	}
	if err != nil {
		return out[:start], Scan{}, err
	}
	return out, s, nil
}

// more makes room for n more bytes in dst, through the call's Grower when it has one. Called
// when the room is short only, so that the common case costs a comparison at the call site.
func (t *JSONTranscoder) more(dst []byte, n int) ([]byte, error) {
	if cap(dst)-len(dst) >= n {
		return dst, nil
	}
	if t.grower == nil {
		return slices.Grow(dst, n), nil
	}
	return t.grower.Grow(dst, n)
}

// request reads the top-level object and writes its resource entries.
func (t *JSONTranscoder) request(dst []byte, sig Signal) ([]byte, Scan, error) {
	b := t.in
	i := skipWS(b, 0)
	if i >= len(b) {
		return dst, Scan{}, ErrJSONSyntax
	}
	if b[i] != '{' {
		// Not an object: a type error if it is JSON at all.
		i, err := skipJSON(b, i, 1)
		if err == nil && skipWS(b, i) != len(b) {
			err = ErrJSONSyntax
		}
		if err == nil {
			err = ErrJSONType
		}
		return dst, Scan{}, err
	}
	rf := &requestField[sig]
	var s Scan
	seen := false
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			ks, ke, esc, v, err := t.member(i)
			if err != nil {
				return dst, Scan{}, err
			}
			i = v
			k := b[ks:ke]
			if esc {
				k = t.unescapeKey(k)
			}
			if k != nil && (string(k) == rf.camel || string(k) == rf.name) {
				if seen {
					return dst, Scan{}, ErrJSONDuplicate
				}
				seen = true
				dst, i, err = t.entries(dst, i, sig, &s)
			} else {
				i, err = skipJSON(b, i, 2)
			}
			if err != nil {
				return dst, Scan{}, err
			}
			var end bool
			if i, end, err = memberEnd(b, i, '}'); err != nil {
				return dst, Scan{}, err
			}
			if end {
				break
			}
		}
	}
	if skipWS(b, i) != len(b) {
		return dst, Scan{}, ErrJSONSyntax
	}
	return dst, s, nil
}

// entries writes the resource entries, the value at b[i] of the request's one field.
func (t *JSONTranscoder) entries(dst []byte, i int, sig Signal, s *Scan) ([]byte, int, error) {
	b := t.in
	switch {
	case b[i] == '[':
	case bytesAt(b, i, "null"):
		return dst, i + 4, nil
	default:
		return dst, i, ErrJSONType
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, nil
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return dst, i, ErrJSONSyntax
		}
		if b[i] != '{' {
			return dst, i, ErrJSONType
		}
		var err error
		if cap(dst)-len(dst) < jsonRoom {
			if dst, err = t.more(dst, jsonRoom); err != nil {
				return dst, i, err
			}
		}
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		var o lenOpen
		dst, o = t.open(dst)
		if dst, i, err = t.object(dst, i, resourceMsg[sig], 1, 3); err != nil {
			return dst, i, err
		}
		dst = t.close(dst, o)
		s.Resources++
		var end bool
		if i, end, err = memberEnd(b, i, ']'); err != nil || end {
			return dst, i, err
		}
	}
}

// member reads an object member's key at b[i] (after whitespace) and its colon, and returns
// where the raw key lies (b[ks:ke], escapes not undone, esc telling whether there are any)
// and the index of the value, which exists.
func (t *JSONTranscoder) member(i int) (ks, ke int, esc bool, v int, err error) {
	b := t.in
	if i >= len(b) || b[i] != '"' {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, 0, false, i, ErrJSONSyntax
		}
	}
	e, esc, ok := stringEnd(b, i+1)
	if !ok {
		return 0, 0, false, i, ErrJSONSyntax
	}
	// Compact JSON, as SDKs write it: the colon, then the value.
	if e+2 < len(b) && b[e+1] == ':' && b[e+2] > ' ' {
		return i + 1, e, esc, e + 2, nil
	}
	v = skipWS(b, e+1)
	if v >= len(b) || b[v] != ':' {
		return 0, 0, false, v, ErrJSONSyntax
	}
	v = skipWS(b, v+1)
	if v >= len(b) {
		return 0, 0, false, v, ErrJSONSyntax
	}
	return i + 1, e, esc, v, nil
}

// memberKey reads the member key at b[i] of an object whose key table is keys, and its colon, and
// returns which name it is (as jsonKeyTable.find) and where the value starts. hint is the name
// that followed the previous key the last time (0: none known): SDKs write the members of
// every span, every data point, in the same order, so it is compared first, in place, with no
// scan for the key's end and no hash.
func (t *JSONTranscoder) memberKey(i int, keys *jsonKeyTable, hint uint8) (uint8, int, error) {
	b := t.in
	if hint != 0 && i < len(b) && b[i] == '"' {
		k := &keys.names[hint-1]
		ks := i + 1
		e := ks + k.n
		if ks+maxKeyLen <= len(b) && e+2 < len(b) && b[e] == '"' && b[e+1] == ':' && b[e+2] > ' ' &&
			keyWords(b, ks, k.n) == k.w {
			return hint, e + 2, nil
		}
	}
	ks, ke, esc, v, err := t.member(i)
	if err != nil {
		return 0, v, err
	}
	switch n := ke - ks; {
	case esc:
		return keys.lookup(t.unescapeKey(b[ks:ke])), v, nil
	case n == 0 || n > maxKeyLen:
		return 0, v, nil
	case ks+maxKeyLen <= len(b):
		// Read in place: b holds the key and enough bytes after it for three words.
		w := keyWords(b, ks, n)
		return keys.find(&w, n), v, nil
	}
	return keys.lookup(b[ks:ke]), v, nil
}

// memberEnd reads what follows a member or element: a comma, or the closing byte (end true).
func memberEnd(b []byte, i int, closing byte) (int, bool, error) {
	if i >= len(b) || b[i] <= ' ' {
		i = skipWS(b, i)
	}
	if i < len(b) {
		switch b[i] {
		case ',':
			return i + 1, false, nil
		case closing:
			return i + 1, true, nil
		}
	}
	return i, false, ErrJSONSyntax
}

// unescapeKey returns an escaped key unescaped, in t.key, or nil when it is too long to name
// a field.
func (t *JSONTranscoder) unescapeKey(key []byte) []byte {
	if len(key) > keyMax {
		return nil
	}
	return appendUnescaped(t.key[:0], key)
}

// bytesAt reports whether b holds w at i.
func bytesAt(b []byte, i int, w string) bool {
	return len(b)-i >= len(w) && string(b[i:i+len(w)]) == w
}

// object reads the JSON object at b[i] ('{'), at depth d, as message m at nesting level nest,
// and writes its fields in field-number order.
func (t *JSONTranscoder) object(dst []byte, i int, m msgID, nest, d int) ([]byte, int, error) {
	b := t.in
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return dst, i + 1, nil
	}
	if d+1 > maxJSONDepth {
		return dst, i, ErrJSONSyntax
	}
	keys, hints := &jsonKeys[m], &t.hints[m]
	base := len(t.segs)
	var seen uint32  // field numbers met, to refuse repeats (OTLP field numbers are below 32)
	var oneofs uint8 // oneof groups already set
	var prev uint8   // the previous key's name (see jsonKeyTable.find); 0 before the first
	for {
		if cap(dst)-len(dst) < jsonRoom {
			var err error
			if dst, err = t.more(dst, jsonRoom); err != nil {
				return dst, i, err
			}
		}
		k, v, err := t.memberKey(i, keys, hints[prev])
		if err != nil {
			return dst, v, err
		}
		i = v
		if k != 0 && hints[prev] != k {
			hints[prev] = k
		}
		prev = k
		f := keys.field(k)
		switch {
		case f == nil:
			// Unknown: a newer schema may define it.
			i, err = skipJSON(b, i, d+1)
		case seen&(1<<f.num) != 0:
			err = ErrJSONDuplicate
		case b[i] == 'n' && bytesAt(b, i, "null"):
			seen |= 1 << f.num
			i += 4
		case f.oneof != 0 && oneofs&(1<<f.oneof) != 0:
			err = ErrJSONOneof
		default:
			seen |= 1 << f.num
			oneofs |= 1 << f.oneof
			start, mark := len(dst), len(t.marks)
			switch {
			case f.flags&jRepeated != 0:
				dst, i, err = t.list(dst, i, f, nest, d+1)
			case f.typ == jMessage:
				dst, i, err = t.nested(dst, i, f, nest, d+1)
			default:
				dst, i, err = t.scalar(dst, i, f, true)
			}
			if err == nil {
				t.wrote(dst, start, mark, f.order)
			}
		}
		if err != nil {
			return dst, i, err
		}
		if i < len(b) && b[i] == ',' {
			i++ // compact JSON: the next member
			continue
		}
		var end bool
		if i, end, err = memberEnd(b, i, '}'); err != nil {
			return dst, i, err
		}
		if end {
			break
		}
	}
	t.order(dst, base)
	t.segs = t.segs[:base]
	return dst, i, nil
}

// list writes the array at b[i], at depth d, of the repeated field f.
func (t *JSONTranscoder) list(dst []byte, i int, f *jsonField, nest, d int) ([]byte, int, error) {
	b := t.in
	if b[i] != '[' {
		return dst, i, ErrJSONType
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, nil // proto3 writes nothing for an empty list, packed or not
	}
	if d+1 > maxJSONDepth {
		return dst, i, ErrJSONSyntax
	}
	packed := f.typ != jMessage && f.typ != jString
	var run lenOpen
	if packed {
		dst = protowire.AppendTag(dst, protowire.Number(f.num), protowire.BytesType)
		dst, run = t.open(dst)
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return dst, i, ErrJSONSyntax
		}
		var err error
		if cap(dst)-len(dst) < jsonRoom {
			if dst, err = t.more(dst, jsonRoom); err != nil {
				return dst, i, err
			}
		}
		if f.typ == jMessage {
			dst, i, err = t.nested(dst, i, f, nest, d+1)
		} else {
			dst, i, err = t.scalar(dst, i, f, !packed)
		}
		if err != nil {
			return dst, i, err
		}
		if i < len(b) && b[i] == ',' {
			i++ // compact JSON: the next element
			continue
		}
		var end bool
		if i, end, err = memberEnd(b, i, ']'); err != nil {
			return dst, i, err
		}
		if end {
			break
		}
	}
	if packed {
		dst = t.close(dst, run)
	}
	return dst, i, nil
}

// nested writes one occurrence of a message field, the object at b[i] at depth d.
func (t *JSONTranscoder) nested(dst []byte, i int, f *jsonField, nest, d int) ([]byte, int, error) {
	if t.in[i] != '{' {
		return dst, i, ErrJSONType
	}
	if nest >= MaxNesting {
		return dst, i, ErrNesting
	}
	// An attribute: a KeyValue at nest+1 holding an AnyValue at depth d+1 (the bounds the
	// general reader checks on its way down).
	if f.msg == mKeyValue && nest+1 < MaxNesting && d+2 <= maxJSONDepth {
		if out, next, ok := t.attribute(dst, i, f); ok {
			return out, next, nil
		}
	}
	dst = f.appendTag(dst)
	dst, o := t.open(dst)
	dst, i, err := t.object(dst, i, f.msg, nest+1, d)
	if err != nil {
		return dst, i, err
	}
	dst = t.close(dst, o)
	if f.item {
		t.items++
	}
	return dst, i, nil
}
