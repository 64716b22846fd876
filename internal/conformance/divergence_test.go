package conformance

import (
	"bytes"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	rmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	rtrace "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// UnmarshalVT is more lenient than protobuf-go on malformed input, and in one case stricter.
// None of this touches well-formed OTLP, which TestRoundTrip covers byte for byte; it matters
// where otlpgate checks a request with UnmarshalVT and then forwards the bytes it received: an
// upstream built on protobuf-go may refuse a request otlpgate accepted. Each divergence has a
// test below that fails once vtprotobuf stops diverging, and FuzzDecode tolerates exactly these
// (plus invalid UTF-8, see TestInvalidUTF8), recognised by scanning the input the way
// UnmarshalVT reads it.

// divergence records which leniencies of UnmarshalVT an input relies on.
type divergence struct {
	// wrongWireType: a declared field with a wire type its kind does not use. protobuf-go
	// keeps it as an unknown field; UnmarshalVT rejects the message (the stricter case).
	wrongWireType bool
	// fieldNumberOutOfRange: a field number above 2^29-1, which protobuf-go rejects and
	// UnmarshalVT truncates to int32.
	fieldNumberOutOfRange bool
	// varintOverflow: a ten-byte varint whose last byte carries bits past 64. protobuf-go
	// rejects it; UnmarshalVT drops the extra bits.
	varintOverflow bool
	// packedOverrun: the last element of a packed field runs past the field's length.
	// protobuf-go rejects it; UnmarshalVT reads on into the following bytes.
	packedOverrun bool
	// lenientUnknown: an unknown field protobuf-go cannot parse but UnmarshalVT skips, such
	// as a group closed by another field's end tag.
	lenientUnknown bool
}

func (d divergence) any() bool {
	return d.wrongWireType || d.fieldNumberOutOfRange || d.varintOverflow || d.packedOverrun || d.lenientUnknown
}

// findDivergence scans b as message md the way UnmarshalVT reads it.
func findDivergence(md protoreflect.MessageDescriptor, b []byte) divergence {
	var d divergence
	d.scan(md, b, 0)
	return d
}

// scan follows the generated UnmarshalVT code: tags and lengths are read with no overflow
// check, numbers truncated to int32, unknown fields skipped like protohelpers.Skip, packed
// elements read up to the end of the buffer rather than the end of the field. It returns false
// where UnmarshalVT fails.
func (d *divergence) scan(md protoreflect.MessageDescriptor, b []byte, depth int) bool {
	if depth > 200 {
		return false
	}
	i := 0
	for i < len(b) {
		start := i
		v, n := d.varint(b[i:])
		if n < 0 {
			return false
		}
		i += n
		if v>>3 > uint64(protowire.MaxValidNumber) {
			d.fieldNumberOutOfRange = true
		}
		num, typ := protowire.Number(int32(v>>3)), protowire.Type(v&7)
		if typ == protowire.EndGroupType || num <= 0 {
			return false
		}
		fd := md.Fields().ByNumber(num)
		if fd == nil {
			n := skipLikeVT(b[start:])
			if n < 0 || start+n > len(b) {
				return false
			}
			if protowire.ConsumeFieldValue(num, typ, b[i:]) < 0 || v>>3 > uint64(protowire.MaxValidNumber) {
				d.lenientUnknown = true
			}
			i = start + n
			continue
		}
		want := wireTypes[fd.Kind()]
		switch {
		case typ == want && typ == protowire.BytesType:
			l, n := d.varint(b[i:])
			if n < 0 || int(l) < 0 || i+n+int(l) < 0 || i+n+int(l) > len(b) {
				return false
			}
			i += n
			if fd.Message() != nil && !d.scan(fd.Message(), b[i:i+int(l)], depth+1) {
				return false
			}
			i += int(l)
		case typ == want:
			n := d.scalar(typ, b[i:])
			if n < 0 {
				return false
			}
			i += n
		case fd.IsList() && typ == protowire.BytesType:
			l, n := d.varint(b[i:])
			if n < 0 || int(l) < 0 || i+n+int(l) < 0 || i+n+int(l) > len(b) {
				return false
			}
			i += n
			end := i + int(l)
			for i < end {
				n := d.scalar(want, b[i:])
				if n < 0 {
					return false
				}
				i += n
			}
			if i > end {
				d.packedOverrun = true
			}
		default:
			d.wrongWireType = true
			return false
		}
	}
	return true
}

// varint reads at most ten bytes, ignoring bits past 64 as UnmarshalVT does.
func (d *divergence) varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, -1
		}
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			if i == 9 && b[i] > 1 {
				d.varintOverflow = true
			}
			return v, i + 1
		}
	}
	return 0, -1
}

func (d *divergence) scalar(typ protowire.Type, b []byte) int {
	switch typ {
	case protowire.VarintType:
		_, n := d.varint(b)
		return n
	case protowire.Fixed32Type:
		if len(b) < 4 {
			return -1
		}
		return 4
	case protowire.Fixed64Type:
		if len(b) < 8 {
			return -1
		}
		return 8
	}
	return -1
}

// skipLikeVT mirrors protohelpers.Skip: from a tag, the length of the field it starts, with
// group contents skipped by depth alone (end tag numbers and inner field numbers unchecked).
func skipLikeVT(b []byte) int {
	var d divergence
	i, depth := 0, 0
	for i < len(b) {
		v, n := d.varint(b[i:])
		if n < 0 {
			return -1
		}
		i += n
		switch protowire.Type(v & 7) {
		case protowire.VarintType:
			_, n := d.varint(b[i:])
			if n < 0 {
				return -1
			}
			i += n
		case protowire.Fixed64Type:
			i += 8
		case protowire.BytesType:
			l, n := d.varint(b[i:])
			if n < 0 || int(l) < 0 {
				return -1
			}
			i += n + int(l)
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return -1
			}
			depth--
		case protowire.Fixed32Type:
			i += 4
		default:
			return -1
		}
		if i < 0 {
			return -1
		}
		if depth == 0 {
			return i
		}
	}
	return -1
}

var wireTypes = map[protoreflect.Kind]protowire.Type{
	protoreflect.BoolKind: protowire.VarintType, protoreflect.EnumKind: protowire.VarintType,
	protoreflect.Int32Kind: protowire.VarintType, protoreflect.Sint32Kind: protowire.VarintType,
	protoreflect.Uint32Kind: protowire.VarintType, protoreflect.Int64Kind: protowire.VarintType,
	protoreflect.Sint64Kind: protowire.VarintType, protoreflect.Uint64Kind: protowire.VarintType,
	protoreflect.Sfixed32Kind: protowire.Fixed32Type, protoreflect.Fixed32Kind: protowire.Fixed32Type,
	protoreflect.FloatKind: protowire.Fixed32Type, protoreflect.Sfixed64Kind: protowire.Fixed64Type,
	protoreflect.Fixed64Kind: protowire.Fixed64Type, protoreflect.DoubleKind: protowire.Fixed64Type,
	protoreflect.StringKind: protowire.BytesType, protoreflect.BytesKind: protowire.BytesType,
	protoreflect.MessageKind: protowire.BytesType, protoreflect.GroupKind: protowire.StartGroupType,
}

// TestDecodeDivergences pins each divergence on a minimal input: what the reference does, what
// UnmarshalVT does, and that findDivergence recognises it.
func TestDecodeDivergences(t *testing.T) {
	tag := func(num uint64, typ protowire.Type) []byte { return protowire.AppendVarint(nil, num<<3|uint64(typ)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	overflow := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	spanName := func(m proto.Message) string { return m.(*tracev1.Span).Name }

	cases := []struct {
		name   string
		ref    proto.Message
		ours   vtCodec
		in     []byte
		refOK  bool // the reference accepts the input
		flag   func(divergence) bool
		verify func(proto.Message) bool // what UnmarshalVT made of it, when it accepts
	}{
		{
			name: "wrong wire type for a declared field",
			ref:  &rtrace.Span{}, ours: &tracev1.Span{},
			in:    cat(tag(5, protowire.VarintType), []byte{1}), // Span.name as a varint
			refOK: true,
			flag:  func(d divergence) bool { return d.wrongWireType },
		},
		{
			name: "field number 2^29 kept as unknown",
			ref:  &rtrace.Span{}, ours: &tracev1.Span{},
			in:     cat(tag(1<<29, protowire.VarintType), []byte{1}),
			flag:   func(d divergence) bool { return d.fieldNumberOutOfRange },
			verify: func(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) == 5+1 },
		},
		{
			name: "field number 2^32+5 read as field 5",
			ref:  &rtrace.Span{}, ours: &tracev1.Span{},
			in:     protowire.AppendString(tag(1<<32+5, protowire.BytesType), "x"),
			flag:   func(d divergence) bool { return d.fieldNumberOutOfRange },
			verify: func(m proto.Message) bool { return spanName(m) == "x" },
		},
		{
			name: "varint overflow in a declared field",
			ref:  &rtrace.Span{}, ours: &tracev1.Span{},
			in:     cat(tag(10, protowire.VarintType), overflow), // dropped_attributes_count
			flag:   func(d divergence) bool { return d.varintOverflow },
			verify: func(m proto.Message) bool { return m.(*tracev1.Span).DroppedAttributesCount == 0xffffffff },
		},
		{
			name: "varint overflow in an unknown field",
			ref:  &rtrace.Span{}, ours: &tracev1.Span{},
			in:     cat(tag(17, protowire.VarintType), overflow),
			flag:   func(d divergence) bool { return d.lenientUnknown },
			verify: func(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) == 2+10 },
		},
		{
			name: "group closed by another field's end tag",
			ref:  &rtrace.Span{}, ours: &tracev1.Span{},
			in:     cat(tag(100, protowire.StartGroupType), tag(4, protowire.EndGroupType)),
			flag:   func(d divergence) bool { return d.lenientUnknown },
			verify: func(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) == 3 },
		},
		{
			// explicit_bounds declares 4 bytes, then flags=1 and flags=2 follow: UnmarshalVT
			// reads one double from the 4 bytes and both flags fields, losing the flags.
			name: "packed element past the field's length",
			ref:  &rmetrics.HistogramDataPoint{}, ours: &metricsv1.HistogramDataPoint{},
			in: cat(tag(7, protowire.BytesType), []byte{4, 1, 2, 3, 4},
				tag(10, protowire.VarintType), []byte{1}, tag(10, protowire.VarintType), []byte{2}),
			flag: func(d divergence) bool { return d.packedOverrun },
			verify: func(m proto.Message) bool {
				p := m.(*metricsv1.HistogramDataPoint)
				return len(p.ExplicitBounds) == 1 && p.Flags == 0
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refErr := proto.Unmarshal(c.in, c.ref)
			if (refErr == nil) != c.refOK {
				t.Fatalf("reference decode error %v, want accepted=%v", refErr, c.refOK)
			}
			d := findDivergence(c.ref.ProtoReflect().Descriptor(), c.in)
			if !c.flag(d) {
				t.Fatalf("findDivergence = %+v, misses this case", d)
			}
			vtErr := c.ours.UnmarshalVT(c.in)
			if c.refOK {
				if vtErr == nil {
					t.Fatal("UnmarshalVT now accepts it: the divergence is gone; drop this case and its exception in FuzzDecode")
				}
				return
			}
			if vtErr != nil {
				t.Fatalf("UnmarshalVT now rejects it (%v): the divergence is gone; drop this case and its exception in FuzzDecode", vtErr)
			}
			if !c.verify(c.ours) {
				t.Fatalf("UnmarshalVT decoded %v", c.ours)
			}
		})
	}
}

// TestInvalidUTF8 pins a divergence: protobuf-go rejects a proto3 string that is not valid
// UTF-8; UnmarshalVT accepts it and MarshalVT writes it back unchanged.
func TestInvalidUTF8(t *testing.T) {
	b := protowire.AppendTag(nil, 5, protowire.BytesType) // Span.name
	b = protowire.AppendString(b, "bad\xff")
	if err := proto.Unmarshal(b, &rtrace.Span{}); err == nil || !isUTF8Error(err) {
		t.Fatalf("reference decode: %v, want an invalid UTF-8 error", err)
	}
	var s tracev1.Span
	if err := s.UnmarshalVT(b); err != nil {
		t.Fatalf("UnmarshalVT now rejects invalid UTF-8 (%v): the divergence is gone; drop this test and the exception in FuzzDecode", err)
	}
	got, err := s.MarshalVT()
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("MarshalVT = % x (err %v), want the input % x", got, err, b)
	}
}

// TestNonMinimalUnknownTag pins a representational difference: UnmarshalVT keeps an unknown
// field's bytes verbatim, protobuf-go re-encodes its tag minimally. Both mean the same field.
func TestNonMinimalUnknownTag(t *testing.T) {
	// Field 17 (not declared by Span), fixed64, its tag in three bytes instead of two.
	b := []byte{0x89, 0x81, 0x00, 1, 2, 3, 4, 5, 6, 7, 8}
	var ref rtrace.Span
	if err := proto.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	canonical := protowire.AppendTag(nil, 17, protowire.Fixed64Type)
	canonical = append(canonical, 1, 2, 3, 4, 5, 6, 7, 8)
	if got := ref.ProtoReflect().GetUnknown(); !bytes.Equal(got, canonical) {
		t.Fatalf("reference keeps % x, want % x", got, canonical)
	}
	var s tracev1.Span
	if err := s.UnmarshalVT(b); err != nil {
		t.Fatal(err)
	}
	got, err := s.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b) {
		t.Fatalf("MarshalVT = % x, want the input % x kept verbatim", got, b)
	}
}
