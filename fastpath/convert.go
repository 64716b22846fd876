package fastpath

import "google.golang.org/protobuf/encoding/protowire"

// The v1 and OTEP requests differ only at the top level: OTEP adds the id at field 1 and moves
// the resource entries from field 1 to field 2. Converting is a re-tag: each entry's length
// prefix and payload are copied verbatim and only its tag is rewritten, so the cost grows with
// the number of top-level fields plus one copy of the bytes, and nothing below the top level is
// looked at. Callers that need the entries checked run ScanRequest first, at the depth they
// choose.
//
// Tags are written in their shortest form, as every protobuf encoder writes them; an input that
// spells a tag in a longer form (legal, never seen in practice) converts to the shortest one,
// so only such inputs do not round-trip byte for byte.

const (
	tagV1Entry   = byte(1<<3 | protowire.BytesType)  // field 1, length-delimited
	tagOTEPID    = byte(1<<3 | protowire.VarintType) // field 1, varint
	tagOTEPEntry = byte(2<<3 | protowire.BytesType)  // field 2, length-delimited
)

// AppendOTEP appends to dst the OTEP encoding of the v1 request body v1 with request id id:
// field 1 = id (left out when id is 0, as proto3 encoders do), then every top-level field of v1
// in order, with each field-1 entry re-tagged to field 2 and every other field carried over
// unchanged. A v1 body that has a field 2 is rejected (ErrFieldCollision).
//
// With canonical input the result equals the MarshalVT of the OTEP request holding the same
// id and entries. OTEPSize tells how many bytes it appends; with that much spare capacity in dst
// it does not allocate. On error it returns dst unchanged in length (bytes past it may have been
// written).
//
// Safe for concurrent use; v1 is only read during the call.
func AppendOTEP(dst []byte, id uint64, v1 []byte) ([]byte, error) {
	start := len(dst)
	if id != 0 {
		dst = append(dst, tagOTEPID)
		dst = protowire.AppendVarint(dst, id)
	}
	b := v1
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b)
		if err != nil {
			return dst[:start], err
		}
		switch num {
		case 1:
			if typ != protowire.BytesType {
				return dst[:start], ErrWireType
			}
			_, vn, err := consumeLen(b[n:])
			if err != nil {
				return dst[:start], err
			}
			dst = append(dst, tagOTEPEntry)
			dst = append(dst, b[n:n+vn]...)
			b = b[n+vn:]
		case 2:
			return dst[:start], ErrFieldCollision
		default:
			vn, err := skipValue(b[n:], typ)
			if err != nil {
				return dst[:start], err
			}
			dst = append(dst, b[:n+vn]...)
			b = b[n+vn:]
		}
	}
	return dst, nil
}

// OTEPSize returns how many bytes AppendOTEP(dst, id, v1) appends, so that callers can take a
// buffer of the right size from a pool. For a malformed v1, on which AppendOTEP fails, it
// returns an upper bound instead. It does not allocate.
//
// Safe for concurrent use.
func OTEPSize(id uint64, v1 []byte) int {
	size := len(v1)
	if id != 0 {
		size += 1 + protowire.SizeVarint(id)
	}
	// Re-tagging an entry writes a one-byte tag where v1 had a tag of at least one byte, so
	// size is already an upper bound; it is exact unless v1 spells a field-1 tag long.
	b := v1
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b)
		if err != nil {
			return size
		}
		vn, err := skipValue(b[n:], typ)
		if err != nil {
			return size
		}
		if num == 1 {
			size -= n - 1
		}
		b = b[n+vn:]
	}
	return size
}

// AppendV1 appends to dst the v1 request body held in the OTEP request otep, and returns the
// request id: field 1 (the id) is dropped, each field-2 entry is re-tagged to field 1, and every
// other top-level field is carried over unchanged, in order. A request without field 1 has id 0;
// one with several has the last, as protobuf keeps the last value of a scalar.
//
// The v1 body is never longer than otep, so len(otep) bytes of spare capacity in dst are enough
// for it not to allocate. On error it returns dst unchanged in length and id 0.
//
// Safe for concurrent use; otep is only read during the call.
func AppendV1(dst []byte, otep []byte) ([]byte, uint64, error) {
	start := len(dst)
	var id uint64
	b := otep
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b)
		if err != nil {
			return dst[:start], 0, err
		}
		switch num {
		case 1:
			if typ != protowire.VarintType {
				return dst[:start], 0, ErrWireType
			}
			v, vn := protowire.ConsumeVarint(b[n:])
			if vn < 0 {
				return dst[:start], 0, varintErr(vn)
			}
			id = v
			b = b[n+vn:]
		case 2:
			if typ != protowire.BytesType {
				return dst[:start], 0, ErrWireType
			}
			_, vn, err := consumeLen(b[n:])
			if err != nil {
				return dst[:start], 0, err
			}
			dst = append(dst, tagV1Entry)
			dst = append(dst, b[n:n+vn]...)
			b = b[n+vn:]
		default:
			vn, err := skipValue(b[n:], typ)
			if err != nil {
				return dst[:start], 0, err
			}
			dst = append(dst, b[:n+vn]...)
			b = b[n+vn:]
		}
	}
	return dst, id, nil
}
