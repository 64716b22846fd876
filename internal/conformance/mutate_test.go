package conformance

import (
	"math"
	"math/rand/v2"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// mutate changes one field of one message chosen at random anywhere in the tree under m, in a
// way proto.Equal must notice, and returns where. Bytes are changed in place, so that a clone
// sharing storage with its original would change the original too and be caught.
func mutate(r *rand.Rand, m protoreflect.Message) string {
	var nodes []protoreflect.Message
	collect(m, &nodes)
	n := nodes[r.IntN(len(nodes))]
	fields := n.Descriptor().Fields()
	fd := fields.Get(r.IntN(fields.Len()))
	where := string(fd.FullName())

	switch {
	case fd.IsList():
		l := n.Mutable(fd).List()
		switch {
		case l.Len() > 0 && fd.Message() == nil && r.IntN(2) == 0:
			i := r.IntN(l.Len())
			l.Set(i, changed(fd, l.Get(i)))
			return where + " (element changed)"
		case l.Len() > 0 && r.IntN(2) == 0:
			l.Truncate(l.Len() - 1)
			return where + " (last element removed)"
		default:
			l.Append(l.NewElement())
			return where + " (element appended)"
		}
	case fd.Message() != nil:
		if n.Has(fd) {
			n.Clear(fd)
			return where + " (cleared)"
		}
		n.Set(fd, n.NewField(fd))
		return where + " (set to an empty message)"
	default:
		n.Set(fd, changed(fd, n.Get(fd)))
		return where + " (value changed)"
	}
}

// collect lists m and every message below it.
func collect(m protoreflect.Message, out *[]protoreflect.Message) {
	*out = append(*out, m)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() || fd.Message() == nil:
		case fd.IsList():
			for i := range v.List().Len() {
				collect(v.List().Get(i).Message(), out)
			}
		default:
			collect(v.Message(), out)
		}
		return true
	})
}

// changed returns a scalar value different from v that is never the zero value, so setting it
// is visible even on a oneof member or a field without presence. Doubles avoid ±0 and NaN,
// which compare equal to nothing or to each other under ==.
func changed(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(!v.Bool())
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(nonZero(v.Enum() + 1))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(nonZero(int32(v.Int()) + 1))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(nonZero(v.Int() + 1))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(nonZero(uint32(v.Uint()) + 1))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(nonZero(v.Uint() + 1))
	case protoreflect.DoubleKind:
		f := v.Float()
		if f == 0 || math.IsInf(f, 0) {
			return protoreflect.ValueOfFloat64(1.5)
		}
		return protoreflect.ValueOfFloat64(-f)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(v.String() + "~")
	case protoreflect.BytesKind:
		b := v.Bytes()
		if len(b) == 0 {
			return protoreflect.ValueOfBytes([]byte{1})
		}
		b[0] ^= 0xff
		return protoreflect.ValueOfBytes(b)
	}
	panic("BUG: no mutation for kind " + fd.Kind().String())
}

// nonZero turns a wrapped-around zero into one: x+1 is never x, and never the default.
func nonZero[T ~int32 | ~int64 | ~uint32 | ~uint64](x T) T {
	if x == 0 {
		return 2
	}
	return x
}
