package fastpath

import (
	"math/bits"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Length prefixes and field order: the two things a protobuf writer needs that a JSON stream
// gives only at the end of an object.
//
// A nested message or packed run gets a one-byte length prefix when it opens, which is all
// most OTLP messages need (attributes, values, status: under 128 bytes). When it closes:
//
//  1. under 128 bytes, the length goes in the byte reserved;
//  2. up to eagerMax bytes (a span, a data point), its content moves one byte right, now,
//     while it is hot in cache, to make room for a two-byte length;
//  3. larger (a scope's spans, a resource entry), the length is recorded as a mark and the
//     room is made by expand, one backward pass over the output at the end of the call.
//
// So content moves at most once per level for levels of at most eagerMax bytes, and once in
// all for the rest; marks exist only for messages larger than eagerMax, so they take a small
// fraction of the output (each 16 bytes for at least eagerMax bytes, at each of at most
// MaxNesting levels).
//
// Fields are written as their keys arrive; an object whose keys came out of field-number order
// has its fields put in order when it closes (order), in a fixed buffer when it is small and
// by rotating its bytes in place when it is large, so that the output is the one canonical
// encoding whatever order the client wrote the keys in. Keys in order, as protobuf's JSON
// writers emit them, cost nothing; keys sorted by name (most JSON libraries) cost one copy of
// each small object out and back. What a hostile body can cost is CPU, never memory: a byte
// moves at most once per field of each object enclosing it (OTLP messages have at most 16)
// and once per length prefix, and nesting stops at MaxNesting.

// eagerMax is the largest message content moved as soon as it closes. It is below 2^14, so
// such a message's length takes two bytes at most, and it is the size of the buffer small
// objects are reordered in: marks never lie inside such a message.
const eagerMax = 2048

// lenMark is a deferred length prefix: the byte reserved for it at pos, and the final length
// of the content after it.
type lenMark struct {
	pos int
	n   uint64
}

// lenOpen is an open message or packed run: where its reserved byte is, how many marks there
// were and how much expand was to add when it opened.
type lenOpen struct {
	pos, mark int
	grown     uint64
}

// jsonSeg is one field written by an object still open: its bytes run from dst[start] to the
// next segment's start, the last one's to the end of dst, and likewise its marks from
// t.marks[mark]. An object's segments are contiguous, in the order written.
type jsonSeg struct {
	start, mark int
	order       uint8
}

// open reserves the length prefix of a message or packed run at the end of dst.
func (t *JSONTranscoder) open(dst []byte) ([]byte, lenOpen) {
	return append(dst, 0), lenOpen{pos: len(dst), mark: len(t.marks), grown: t.grown}
}

// close writes, or defers, the length of the content written since o opened.
func (t *JSONTranscoder) close(dst []byte, o lenOpen) []byte {
	raw := len(dst) - o.pos - 1
	switch {
	case raw < 0x80:
		dst[o.pos] = byte(raw)
	case raw <= eagerMax:
		dst = append(dst, 0)
		copy(dst[o.pos+2:], dst[o.pos+1:len(dst)-1])
		dst[o.pos] = byte(raw) | 0x80
		dst[o.pos+1] = byte(raw >> 7)
	default:
		// The content holds the marks closed since o opened, which expand will widen.
		n := uint64(raw) + t.grown - o.grown
		t.marks = slices.Insert(t.marks, o.mark, lenMark{pos: o.pos, n: n})
		t.grown += uint64(protowire.SizeVarint(n) - 1)
	}
	return dst
}

// expand writes the deferred length prefixes, moving the bytes after each right by the room
// the prefixes before it take beyond their reserved byte: one pass from the end.
func (t *JSONTranscoder) expand(dst []byte) ([]byte, error) {
	if len(t.marks) == 0 {
		return dst, nil
	}
	r := len(dst)
	dst, err := t.more(dst, int(t.grown))
	if err != nil {
		return dst, err
	}
	dst = dst[:r+int(t.grown)]
	w := len(dst)
	for i := len(t.marks) - 1; i >= 0; i-- {
		mk := t.marks[i]
		w -= copy(dst[w-(r-mk.pos-1):w], dst[mk.pos+1:r])
		k := protowire.SizeVarint(mk.n)
		w -= k
		putVarint(dst[w:], mk.n)
		r = mk.pos
	}
	if w != r {
		panic("BUG: fastpath JSON length prefixes do not add up")
	}
	return dst, nil
}

// wrote records the field of order ord the innermost open object has just written at
// dst[start:] (its marks from mark on).
func (t *JSONTranscoder) wrote(dst []byte, start, mark int, ord uint8) {
	if len(dst) == start {
		return // a zero scalar or an empty list: nothing written
	}
	t.segs = append(t.segs, jsonSeg{start: start, mark: mark, order: ord})
}

// order puts the fields of the object whose segments start at base, and which ends at the
// end of dst, in field-number order.
func (t *JSONTranscoder) order(dst []byte, base int) {
	segs := t.segs[base:]
	for i := 1; i < len(segs); i++ {
		if segs[i].order < segs[i-1].order {
			t.reorder(dst, segs)
			return
		}
	}
}

func (t *JSONTranscoder) reorder(dst []byte, segs []jsonSeg) {
	from := segs[0].start
	if len(dst)-from <= len(t.tmp) {
		// Small: no marks inside (see eagerMax). Copy out, write back in order, reading the
		// segments through a bit set of their orders (field numbers are below 32, oneof
		// members set bit 7: orderSlot folds that into 0..63).
		tmp := t.tmp[:copy(t.tmp[:], dst[from:])]
		var at [64]uint8
		var set uint64
		for k, s := range segs {
			at[orderSlot(s.order)] = uint8(k)
			set |= 1 << orderSlot(s.order)
		}
		w := from
		for ; set != 0; set &= set - 1 {
			k := int(at[bits.TrailingZeros64(set)])
			end := len(tmp)
			if k+1 < len(segs) {
				end = segs[k+1].start - from
			}
			w += copy(dst[w:], tmp[segs[k].start-from:end])
		}
		return
	}
	// Large: an insertion sort whose every move is a rotation of bytes and marks in place.
	// Segment i ends where segment i+1 starts; the last one at the end of dst and t.marks.
	for i := 1; i < len(segs); i++ {
		s := segs[i]
		end, markEnd := len(dst), len(t.marks)
		if i+1 < len(segs) {
			end, markEnd = segs[i+1].start, segs[i+1].mark
		}
		j := i
		for j > 0 && segs[j-1].order > s.order {
			j--
		}
		if j == i {
			continue
		}
		// dst[a:s.start] holds the fields that belong after s; s moves before them.
		a, ma := segs[j].start, segs[j].mark
		moveA, moveB := end-s.start, s.start-a // how far the two parts travel
		marksB := markEnd - s.mark
		rotate(dst[a:end], moveB, t.tmp[:])
		for k := ma; k < s.mark; k++ {
			t.marks[k].pos += moveA
		}
		for k := s.mark; k < markEnd; k++ {
			t.marks[k].pos -= moveB
		}
		rotateMarks(t.marks[ma:markEnd], s.mark-ma)
		copy(segs[j+1:i+1], segs[j:i])
		for k := j + 1; k <= i; k++ {
			segs[k].start += moveA
			segs[k].mark += marksB
		}
		segs[j] = jsonSeg{start: a, mark: ma, order: s.order}
	}
}

// orderSlot maps a field's order (jsonField.order) to a bit of a uint64, keeping the order.
func orderSlot(o uint8) uint {
	return uint(o&0x1f) | uint(o>>7)<<5
}

// rotate turns b = A B, with len(A) = k, into B A in place, moving each byte a bounded number
// of times through tmp.
func rotate(b []byte, k int, tmp []byte) {
	for k > 0 && k < len(b) {
		a, c := k, len(b)-k
		switch {
		case a <= len(tmp):
			copy(tmp, b[:a])
			copy(b, b[a:])
			copy(b[c:], tmp[:a])
			return
		case c <= len(tmp):
			copy(tmp, b[a:])
			copy(b[c:], b[:a])
			copy(b, tmp[:c])
			return
		case a <= c:
			// A B1 B2 with len(B2) = a: swapping A and B2 puts A in place; B2 B1 is left to
			// rotate by a.
			swapBlocks(b[:a], b[c:], tmp)
			b = b[:c]
		default:
			// A1 A2 B with len(A1) = c: swapping A1 and B puts B in place; A2 A1 is left to
			// rotate by a-c.
			swapBlocks(b[:c], b[a:], tmp)
			b, k = b[c:], a-c
		}
	}
}

// swapBlocks exchanges the contents of x and y, which have the same length and do not overlap.
func swapBlocks(x, y, tmp []byte) {
	for len(x) > 0 {
		n := copy(tmp, x)
		copy(x, y[:n])
		copy(y, tmp[:n])
		x, y = x[n:], y[n:]
	}
}

// rotateMarks turns m = A B, with len(A) = k, into B A.
func rotateMarks(m []lenMark, k int) {
	slices.Reverse(m[:k])
	slices.Reverse(m[k:])
	slices.Reverse(m)
}
