package fastpath

import "google.golang.org/protobuf/encoding/protowire"

// Field is one field of a message as TopLevel.Next found it. Offsets index the slice the
// TopLevel was made over.
type Field struct {
	Num  protowire.Number
	Type protowire.Type
	// Tag is the offset of the field's tag and After the offset just past it, where the value
	// (for BytesType, its length prefix) starts. Value is the offset of the value itself: for
	// BytesType the first byte after the length prefix, otherwise After. End is the offset just
	// past the value, so b[Tag:End] is the whole field, b[After:End] what follows its tag and,
	// for BytesType, b[Value:End] its payload.
	Tag, After, Value, End int
	// Varint is the value of a VarintType field, 0 for other types.
	Varint uint64
}

// TagLen is the size of the field's tag: 1 for every field number below 16 written in the
// shortest form, as every protobuf encoder writes it.
func (f Field) TagLen() int { return f.After - f.Tag }

// TopLevel walks the fields of one message without looking into their values: the one walker
// of a request's top level (scanning, re-tagging, framing and partial admission all use it,
// so that they agree on what a well-formed top level is). Tags, lengths and varints are
// checked; group wire types are refused (no proto3 schema has them). The zero TopLevel is an
// empty message.
//
// It is a value type meant to live on the caller's stack: walking does not allocate. The
// first malformed field ends the walk, and Err tells why.
//
//	for it := fastpath.NewTopLevel(b); ; {
//		f, ok := it.Next()
//		if !ok {
//			break
//		}
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//
// A TopLevel belongs to one goroutine; b is only read, and must not change during the walk.
type TopLevel struct {
	b   []byte
	off int
	err error
}

// NewTopLevel returns a walker over the fields of the message encoded in b.
func NewTopLevel(b []byte) TopLevel { return TopLevel{b: b} }

// Next returns the next field, or false at the end of the message or at the first malformed
// field (then Err is set and every further call returns false).
func (t *TopLevel) Next() (Field, bool) {
	if t.err != nil || t.off >= len(t.b) {
		return Field{}, false
	}
	b := t.b[t.off:]
	f := Field{Tag: t.off}
	var n int
	// Nearly every tag of OTLP is one byte; the rest, and every error, goes through protowire.
	if c := b[0]; c >= 1<<3 && c < 0x80 {
		f.Num, f.Type, n = protowire.Number(c>>3), protowire.Type(c&7), 1
	} else {
		var err error
		if f.Num, f.Type, n, err = consumeTag(b); err != nil {
			t.err = err
			return Field{}, false
		}
	}
	b = b[n:]
	f.After = t.off + n
	switch f.Type {
	case protowire.VarintType:
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			t.err = varintErr(m)
			return Field{}, false
		}
		f.Varint = v
		f.Value, f.End = t.off+n, t.off+n+m
	case protowire.BytesType:
		p, m, err := consumeLen(b)
		if err != nil {
			t.err = err
			return Field{}, false
		}
		f.Value, f.End = t.off+n+p, t.off+n+m
	default:
		m, err := skipValue(b, f.Type)
		if err != nil {
			t.err = err
			return Field{}, false
		}
		f.Value, f.End = t.off+n, t.off+n+m
	}
	t.off = f.End
	return f, true
}

// Err is the reason the walk stopped early, nil when it reached the end of the message.
func (t *TopLevel) Err() error { return t.err }

// Offset is how far the walk got: the offset just past the last field Next returned.
func (t *TopLevel) Offset() int { return t.off }
