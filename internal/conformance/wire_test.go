package conformance

import (
	"bytes"
	"fmt"
	"strings"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var deterministic = proto.MarshalOptions{Deterministic: true}

// sameBytes returns nil when got equals want, or an error naming the first differing byte and
// the field path that holds it in want (as decoded with md), so that a failure points at a
// field instead of at a hex dump.
func sameBytes(what string, md protoreflect.MessageDescriptor, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	off := 0
	for off < len(got) && off < len(want) && got[off] == want[off] {
		off++
	}
	return fmt.Errorf("%s: bytes differ at offset %d (in %s): got %d bytes, want %d\n got  % x\n want % x",
		what, off, wirePath(md, want, off), len(got), len(want), window(got, off), window(want, off))
}

func window(b []byte, off int) []byte {
	lo, hi := max(off-8, 0), min(off+16, len(b))
	if lo > hi {
		return nil
	}
	return b[lo:hi]
}

// wirePath names the field holding byte off of b, descending into submessages:
// "resource_spans[1].scope_spans[0].spans[2].name". Fields md does not declare show as numbers.
func wirePath(md protoreflect.MessageDescriptor, b []byte, off int) string {
	var path []string
	for depth := 0; depth < 64; depth++ {
		seen := map[protowire.Number]int{}
		pos, next := 0, -1
		for pos < len(b) {
			num, typ, n := protowire.ConsumeTag(b[pos:])
			if n < 0 {
				return strings.Join(append(path, "(malformed tag)"), ".")
			}
			m := protowire.ConsumeFieldValue(num, typ, b[pos+n:])
			if m < 0 {
				return strings.Join(append(path, "(malformed value)"), ".")
			}
			idx := seen[num]
			seen[num]++
			if off >= pos+n+m {
				pos += n + m
				continue
			}
			var fd protoreflect.FieldDescriptor
			if md != nil {
				fd = md.Fields().ByNumber(num)
			}
			elem := fmt.Sprintf("#%d", num)
			if fd != nil {
				elem = string(fd.Name())
				if fd.IsList() {
					elem = fmt.Sprintf("%s[%d]", elem, idx)
				}
			}
			path = append(path, elem)
			if fd == nil || fd.Message() == nil || typ != protowire.BytesType || off < pos+n {
				return strings.Join(path, ".")
			}
			v, _ := protowire.ConsumeBytes(b[pos+n:])
			start := pos + n + m - len(v)
			if off < start {
				return strings.Join(append(path, "(length)"), ".")
			}
			md, b, off, next = fd.Message(), v, off-start, 0
			break
		}
		if next < 0 {
			return strings.Join(append(path, "(past the end)"), ".")
		}
	}
	return strings.Join(path, ".")
}

// entries splits the body of a v1 export request into its field-1 entries. It is written
// against protowire alone so that it shares nothing with the code under test.
func entries(body []byte) ([][]byte, error) {
	var out [][]byte
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if num != 1 || typ != protowire.BytesType {
			return nil, fmt.Errorf("unexpected field %d wire type %d in a v1 request", num, typ)
		}
		v, m := protowire.ConsumeBytes(body[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		out = append(out, v)
		body = body[n+m:]
	}
	return out, nil
}

// otepBytes is the encoding an OTEP export request must have: the id as a field-1 varint
// (absent when zero, as proto3 omits defaults), then each v1 entry as field 2.
func otepBytes(id uint64, v1 []byte) ([]byte, error) {
	es, err := entries(v1)
	if err != nil {
		return nil, err
	}
	var b []byte
	if id != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, id)
	}
	for _, e := range es {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b, nil
}

// v1Bytes is the inverse of otepBytes: it drops the id and moves field-2 entries back to
// field 1, the re-tag a server does when it forwards an OTEP request as v1.
func v1Bytes(otep []byte) ([]byte, error) {
	var b []byte
	for len(otep) > 0 {
		num, typ, n := protowire.ConsumeTag(otep)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, otep[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		switch {
		case num == 1 && typ == protowire.VarintType:
		case num == 2 && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(otep[n:])
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		default:
			return nil, fmt.Errorf("unexpected field %d wire type %d in an OTEP request", num, typ)
		}
		otep = otep[n+m:]
	}
	return b, nil
}
