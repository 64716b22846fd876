package fastpath

import (
	"encoding/binary"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The schema-table walker that ScanRequest used before the generated walkers (walk_gen.go),
// kept as the reference they are compared with (FuzzScanEquivalence): it interprets the table
// at run time, so a walker generated wrongly and the table cannot agree by accident.

// refWalk checks the message m encoded in b, at nesting level nest, and returns the items it
// holds. When full is false it descends only into fields on the path to the items (fPath) and
// only length-checks other messages.
func refWalk(m msgID, b []byte, nest int, full bool) (int, error) {
	fields := schema[m]
	items := 0
	// The oneof member whose run is being counted, and the items of that run.
	var oneofNum protowire.Number
	oneofItems := 0
	for len(b) > 0 {
		// Nearly every tag of OTLP is one byte (field numbers below 16) and nearly every
		// length below 128: those are decided here, without a call; anything longer, and every
		// error, goes through protowire.
		var num protowire.Number
		var typ protowire.Type
		if c := b[0]; c >= 1<<3 && c < 0x80 {
			num, typ = protowire.Number(c>>3), protowire.Type(c&7)
			b = b[1:]
		} else {
			var n int
			var err error
			if num, typ, n, err = consumeTag(b); err != nil {
				return 0, err
			}
			b = b[n:]
		}
		var f schemaField
		if int(num) < len(fields) {
			f = fields[num]
		}
		var n int
		var err error
		switch f.kind {
		case kUnknown:
			n, err = skipValue(b, typ)
		case kVarint:
			if typ != protowire.VarintType {
				return 0, ErrWireType
			}
			if len(b) > 0 && b[0] < 0x80 {
				n = 1
			} else {
				n, err = skipValue(b, typ)
			}
		case kFixed64:
			if typ != protowire.Fixed64Type {
				return 0, ErrWireType
			}
			if n = 8; len(b) < n {
				return 0, ErrTruncated
			}
		case kFixed32:
			if typ != protowire.Fixed32Type {
				return 0, ErrWireType
			}
			if n = 4; len(b) < n {
				return 0, ErrTruncated
			}
		case kBytes, kString:
			if typ != protowire.BytesType {
				return 0, ErrWireType
			}
			hdr := 1
			if len(b) > 0 && int(b[0]) < len(b) && b[0] < 0x80 {
				n = 1 + int(b[0])
			} else {
				hdr, n, err = consumeLen(b)
			}
			// protobuf-go refuses strings that are not UTF-8, and an upstream built on it
			// would refuse the whole batch: one such request must not take others with it.
			if err == nil && f.kind == kString && full && !refValidUTF8(b[hdr:n]) {
				return 0, ErrUTF8
			}
		case kTraceID, kSpanID:
			if typ != protowire.BytesType {
				return 0, ErrWireType
			}
			var hdr int
			if hdr, n, err = consumeLen(b); err != nil {
				return 0, err
			}
			size := spanIDSize
			if f.kind == kTraceID {
				size = traceIDSize
			}
			// The Collector's decoder refuses an id of any other size, and the batch with it.
			if l := n - hdr; full && l != 0 && l != size {
				return 0, ErrIDLength
			}
		case kPackedFixed64:
			n, err = refPackedFixed64(b, typ)
		case kPackedVarint:
			n, err = refPackedVarint(b, typ)
		case kMessage:
			if typ != protowire.BytesType {
				return 0, ErrWireType
			}
			p := 1
			if len(b) > 0 && int(b[0]) < len(b) && b[0] < 0x80 {
				n = 1 + int(b[0])
			} else if p, n, err = consumeLen(b); err != nil {
				return 0, err
			}
			got := 0
			if full || f.flags&fPath != 0 {
				if nest >= MaxNesting {
					return 0, ErrNesting
				}
				got, err = refWalk(f.msg, b[p:n], nest+1, full)
				if err != nil {
					return 0, err
				}
			}
			if f.flags&fItem != 0 {
				got++
			}
			if f.flags&fLegacy != 0 {
				got = 0 // checked, not counted
			}
			if f.flags&fOneof != 0 {
				if num != oneofNum {
					oneofNum, oneofItems = num, 0
				}
				oneofItems += got
			} else {
				items += got
			}
		default:
			panic("BUG: fastpath schema has an unhandled field kind")
		}
		if err != nil {
			return 0, err
		}
		b = b[n:]
	}
	return items + oneofItems, nil
}

// refPackedFixed64 checks a repeated 8-byte field, which a writer may send one element per field
// (wire type 1) or packed into one length-delimited run (wire type 2).
func refPackedFixed64(b []byte, typ protowire.Type) (int, error) {
	switch typ {
	case protowire.Fixed64Type:
		return skipValue(b, typ)
	case protowire.BytesType:
		p, n, err := consumeLen(b)
		if err != nil {
			return 0, err
		}
		if (n-p)%8 != 0 {
			return 0, ErrPacked
		}
		return n, nil
	}
	return 0, ErrWireType
}

// refPackedVarint checks a repeated varint field, sent one element per field (wire type 0) or
// packed (wire type 2). A packed run must end exactly at the end of its last varint.
func refPackedVarint(b []byte, typ protowire.Type) (int, error) {
	switch typ {
	case protowire.VarintType:
		return skipValue(b, typ)
	case protowire.BytesType:
		p, n, err := consumeLen(b)
		if err != nil {
			return 0, err
		}
		for run := b[p:n]; len(run) > 0; {
			_, vn := protowire.ConsumeVarint(run)
			if vn < 0 {
				if err := varintErr(vn); err != ErrTruncated {
					return 0, err
				}
				return 0, ErrPacked
			}
			run = run[vn:]
		}
		return n, nil
	}
	return 0, ErrWireType
}

// refValidUTF8 is the UTF-8 check the reference walker shipped with: utf8.Valid behind an
// all-ASCII test in words.
func refValidUTF8(b []byte) bool {
	s := b
	for len(s) >= 8 {
		if binary.LittleEndian.Uint64(s)&0x8080808080808080 != 0 {
			return utf8.Valid(b)
		}
		s = s[8:]
	}
	for _, c := range s {
		if c >= 0x80 {
			return utf8.Valid(b)
		}
	}
	return true
}

// refScanRequest is ScanRequest as it was when the reference walker served it: the same top
// level, with each entry walked by refWalk. The benchmarks and FuzzScanEquivalence compare the
// two.
func refScanRequest(sig Signal, b []byte, layout Layout, depth Depth) (Scan, error) {
	if sig >= NumSignals {
		return Scan{}, ErrSignal
	}
	if layout >= NumLayouts {
		return Scan{}, ErrLayout
	}
	if depth >= numDepths {
		return Scan{}, ErrDepth
	}
	entryNum := protowire.Number(1)
	if layout == LayoutOTEP {
		entryNum = 2
	}
	var s Scan
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b)
		if err != nil {
			return Scan{}, err
		}
		b = b[n:]
		switch {
		case num == entryNum:
			if typ != protowire.BytesType {
				return Scan{}, ErrWireType
			}
			p, n, err := consumeLen(b)
			if err != nil {
				return Scan{}, err
			}
			entry := b[p:n]
			b = b[n:]
			s.Resources++
			if depth > DepthTop {
				items, err := refWalk(resourceMsg[sig], entry, 1, depth == DepthFull)
				if err != nil {
					return Scan{}, err
				}
				s.Items += items
			}
		case layout == LayoutOTEP && num == 1:
			if typ != protowire.VarintType {
				return Scan{}, ErrWireType
			}
			id, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Scan{}, varintErr(n)
			}
			b = b[n:]
			s.ID, s.HasID = id, true
		default:
			n, err := skipValue(b, typ)
			if err != nil {
				return Scan{}, err
			}
			b = b[n:]
		}
	}
	if depth == DepthTop {
		s.Items = -1
	}
	return s, nil
}
