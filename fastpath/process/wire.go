package process

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// errMalformed: a message below the top level does not hold together (a bad tag, a length
// past its end, a known field of the wrong wire type). The request is refused whole, as the
// intake's scan would have refused it at a deeper -grpc.scan-depth.
var errMalformed = errors.New("process: malformed message below the top level")

// field is one field of a message: b[tag:end] is the whole field and, for length-delimited
// fields, b[val:end] its payload.
type field struct {
	num           protowire.Number
	typ           protowire.Type
	tag, val, end int
	varint        uint64 // the value of a varint field
}

// size is the encoded size of the whole field.
func (f field) size() int { return f.end - f.tag }

// next reads the field that starts at b[off:]. Nearly every tag and many lengths of OTLP are
// one byte, which the first branch reads without calling protowire.
func next(b []byte, off int) (field, error) {
	f := field{tag: off}
	if c := b[off]; c >= 1<<3 && c < 0x80 {
		f.num, f.typ = protowire.Number(c>>3), protowire.Type(c&7)
		off++
	} else {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return f, errMalformed
		}
		f.num, f.typ = num, typ
		off += n
	}
	switch f.typ {
	case protowire.BytesType:
		if off < len(b) && b[off] < 0x80 {
			l := int(b[off])
			off++
			if l > len(b)-off {
				return f, errMalformed
			}
			f.val, f.end = off, off+l
			return f, nil
		}
		l, n := protowire.ConsumeVarint(b[off:])
		if n < 0 || l > uint64(len(b)-off-n) {
			return f, errMalformed
		}
		f.val, f.end = off+n, off+n+int(l)
	case protowire.Fixed64Type:
		if len(b)-off < 8 {
			return f, errMalformed
		}
		f.val, f.end = off, off+8
	case protowire.Fixed32Type:
		if len(b)-off < 4 {
			return f, errMalformed
		}
		f.val, f.end = off, off+4
	case protowire.VarintType:
		if off < len(b) && b[off] < 0x80 {
			f.varint = uint64(b[off])
			f.val, f.end = off, off+1
			return f, nil
		}
		v, n := protowire.ConsumeVarint(b[off:])
		if n < 0 {
			return f, errMalformed
		}
		f.varint = v
		f.val, f.end = off, off+n
	default:
		n := protowire.ConsumeFieldValue(f.num, f.typ, b[off:])
		if n < 0 {
			return f, errMalformed
		}
		f.val, f.end = off, off+n
	}
	return f, nil
}

// fieldSize is the encoded size of a length-delimited field with a one-byte tag and a payload
// of n bytes.
func fieldSize(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// appendHeader appends the one-byte tag of length-delimited field num and the length n.
func appendHeader(dst []byte, num protowire.Number, n int) []byte {
	dst = append(dst, byte(num)<<3|byte(protowire.BytesType))
	return protowire.AppendVarint(dst, uint64(n))
}
