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
	// TagV1Entry is the tag of a v1 request's entries, which a piece of one copies.
	TagV1Entry   = byte(1<<3 | protowire.BytesType)  // field 1, length-delimited
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
	for it := NewTopLevel(v1); ; {
		f, ok := it.Next()
		if !ok {
			if err := it.Err(); err != nil {
				return dst[:start], err
			}
			return dst, nil
		}
		switch f.Num {
		case 1:
			if f.Type != protowire.BytesType {
				return dst[:start], ErrWireType
			}
			dst = append(dst, tagOTEPEntry)
			dst = append(dst, v1[f.After:f.End]...)
		case 2:
			return dst[:start], ErrFieldCollision
		default:
			dst = append(dst, v1[f.Tag:f.End]...)
		}
	}
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
	for it := NewTopLevel(v1); ; {
		f, ok := it.Next()
		if !ok {
			return size
		}
		if f.Num == 1 {
			size -= f.TagLen() - 1
		}
	}
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
	dst, id, _, err := appendV1(dst, otep, LayoutOTEP, false)
	return dst, id, err
}

// Stripped is what AppendEntries left out of a request: its top-level fields other than the
// resource entries (and, in the OTEP layout, the id).
type Stripped struct {
	Fields, Bytes int
}

// AppendEntries appends to dst the resource entries of the Export request req, in layout, as a
// v1 request body, and drops every other top-level field, which it reports. This is how a
// request joins a batch: once requests are concatenated, a top-level field that is not an
// entry belongs to no request in particular, and one that an upstream refuses (a v1 field 2,
// say, which OTEP reads as an entry) would make it refuse every request of the batch. A
// request whose top level is malformed (a bad tag, a length past the end, a known field of the
// wrong wire type, a group) is refused whole.
//
// Entries are copied verbatim, in runs: a request without anything to strip costs one copy
// (v1) or one copy per entry (OTEP). The result is never longer than req, so len(req) bytes of
// spare capacity in dst are enough for it not to allocate. The id of an OTEP request is
// returned; it is 0 for v1. On error it returns dst unchanged in length.
//
// Safe for concurrent use; req is only read during the call.
func AppendEntries(dst, req []byte, layout Layout) ([]byte, uint64, Stripped, error) {
	if layout >= NumLayouts {
		return dst, 0, Stripped{}, ErrLayout
	}
	return appendV1(dst, req, layout, true)
}

// appendV1 copies the entries of req to dst as v1 entries. strip drops the fields that are not
// entries (nor the OTEP id); otherwise they are carried over.
func appendV1(dst, req []byte, layout Layout, strip bool) ([]byte, uint64, Stripped, error) {
	start := len(dst)
	var id uint64
	var st Stripped
	run := 0 // start of the bytes not yet copied that are copied as they are
	it := NewTopLevel(req)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		switch {
		case layout == LayoutV1 && f.Num == 1, layout == LayoutOTEP && f.Num == 2:
			if f.Type != protowire.BytesType {
				return dst[:start], 0, Stripped{}, ErrWireType
			}
			if layout == LayoutOTEP {
				// A re-tag: the run so far, then the entry under its v1 tag.
				dst = append(dst, req[run:f.Tag]...)
				dst = append(dst, TagV1Entry)
				dst = append(dst, req[f.After:f.End]...)
				run = f.End
			}
		case layout == LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				return dst[:start], 0, Stripped{}, ErrWireType
			}
			id = f.Varint
			dst = append(dst, req[run:f.Tag]...)
			run = f.End
		case strip:
			st.Fields++
			st.Bytes += f.End - f.Tag
			dst = append(dst, req[run:f.Tag]...)
			run = f.End
		}
	}
	if err := it.Err(); err != nil {
		return dst[:start], 0, Stripped{}, err
	}
	dst = append(dst, req[run:]...)
	return dst, id, st, nil
}
