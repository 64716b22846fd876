package fastpath

import (
	"encoding/binary"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Depth is how far ScanRequest looks into a request. Each depth checks everything the one before
// it checks.
type Depth uint8

const (
	// DepthTop checks only the top-level fields: tags, lengths and wire types. It counts resource
	// entries but not items (Scan.Items is -1). Its cost grows with the number of top-level
	// fields, not with the size of the request.
	DepthTop Depth = iota
	// DepthResource also walks each resource entry, its scope entries and, for metrics, each
	// metric and its data container, checking the wire types of the fields it passes, so that
	// items can be counted. Spans, data points and log records are length-checked, not opened.
	DepthResource
	// DepthFull walks every nested message down to its values and checks each field against the
	// OTLP schema: wire types of known fields, lengths, varints, fixed sizes, packed runs, and
	// a nesting cap (MaxNesting). Strings are not checked for UTF-8, as vtprotobuf does not check
	// them either. A request DepthFull accepts is one UnmarshalVT of our types accepts.
	DepthFull
	numDepths
)

// String returns the depth's name as used in flags and logs. Safe for concurrent use.
func (d Depth) String() string {
	switch d {
	case DepthTop:
		return "top"
	case DepthResource:
		return "resource"
	case DepthFull:
		return "full"
	}
	return "unknown"
}

// Layout is where a request keeps its resource entries.
type Layout uint8

const (
	// LayoutV1 is Export{Trace,Metrics,Logs}ServiceRequest of OTLP v1: entries at field 1.
	LayoutV1 Layout = iota
	// LayoutOTEP is {Trace,Metric,Log}ExportRequest of the OTEP 0035 protocol: the request id
	// (a varint) at field 1 and the entries at field 2.
	LayoutOTEP
	numLayouts
)

// String returns the layout's name as used in flags and logs. Safe for concurrent use.
func (l Layout) String() string {
	switch l {
	case LayoutV1:
		return "v1"
	case LayoutOTEP:
		return "otep"
	}
	return "unknown"
}

// MaxNesting is the deepest message nesting ScanRequest accepts, counting a resource entry as
// level 1. The deepest fixed path of OTLP (resource metrics, scope, metric, histogram, data
// point, exemplar, attribute, value) takes 8 levels; the rest is for AnyValue arrays and maps
// nested in one another, which leaves more than 30 levels of nested maps in a log body. The
// cap exists because one level costs two bytes on the wire but a stack frame in the walk.
const MaxNesting = 100

// Scan is what ScanRequest learned about a request.
type Scan struct {
	// Resources is the number of resource entries (ResourceSpans, ResourceMetrics,
	// ResourceLogs).
	Resources int
	// Items is the number of spans, metric data points (of every type) or log records, counted
	// as a decoder would see them: of the members of a Metric's data oneof only the last one
	// seen counts, with repeats of that member merged. It is -1 at DepthTop, which does not
	// open the entries.
	Items int
	// ID is the request id of an OTEP request (the last field 1, as protobuf keeps the last
	// value of a scalar), and HasID tells whether field 1 was present at all: proto3 does not
	// write an id of 0. Both are zero for LayoutV1.
	ID    uint64
	HasID bool
}

// ScanRequest checks that b is a well-formed Export request of signal sig in layout, to the
// given depth, and counts its resource entries and items. It does not allocate and keeps no
// reference to b. On error the Scan is zero.
//
// A request cut short at a top-level field boundary is a well-formed request with fewer
// entries, which no protobuf reader can tell from one sent that way; ScanRequest accepts it and
// counts the entries it holds. A request cut anywhere else ends inside a tag, a length or an
// entry, and is rejected at every depth.
//
// Unknown fields, at any level ScanRequest walks, are skipped when well-formed: a newer schema
// may add them. Group wire types are rejected everywhere.
//
// Safe for concurrent use.
func ScanRequest(sig Signal, b []byte, layout Layout, depth Depth) (Scan, error) {
	if sig >= NumSignals {
		return Scan{}, ErrSignal
	}
	if layout >= numLayouts {
		return Scan{}, ErrLayout
	}
	if depth >= numDepths {
		return Scan{}, ErrDepth
	}
	entryNum := protowire.Number(1)
	if layout == LayoutOTEP {
		entryNum = 2
	}
	root := resourceMsg[sig]
	full := depth == DepthFull
	var s Scan
	for it := NewTopLevel(b); ; {
		f, ok := it.Next()
		if !ok {
			if err := it.Err(); err != nil {
				return Scan{}, err
			}
			break
		}
		switch {
		case f.Num == entryNum:
			if f.Type != protowire.BytesType {
				return Scan{}, ErrWireType
			}
			s.Resources++
			if depth > DepthTop {
				items, err := walk(root, b[f.Value:f.End], 1, full)
				if err != nil {
					return Scan{}, err
				}
				s.Items += items
			}
		case layout == LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				return Scan{}, ErrWireType
			}
			s.ID, s.HasID = f.Varint, true
		}
	}
	if depth == DepthTop {
		s.Items = -1
	}
	return s, nil
}

// walk checks the message m encoded in b, at nesting level nest, and returns the items it
// holds. When full is false it descends only into fields on the path to the items (fPath) and
// only length-checks other messages.
func walk(m msgID, b []byte, nest int, full bool) (int, error) {
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
			if err == nil && f.kind == kString && full && !validUTF8(b[hdr:n]) {
				return 0, ErrUTF8
			}
		case kPackedFixed64:
			n, err = packedFixed64(b, typ)
		case kPackedVarint:
			n, err = packedVarint(b, typ)
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
				got, err = walk(f.msg, b[p:n], nest+1, full)
				if err != nil {
					return 0, err
				}
			}
			if f.flags&fItem != 0 {
				got++
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

// packedFixed64 checks a repeated 8-byte field, which a writer may send one element per field
// (wire type 1) or packed into one length-delimited run (wire type 2).
func packedFixed64(b []byte, typ protowire.Type) (int, error) {
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

// packedVarint checks a repeated varint field, sent one element per field (wire type 0) or
// packed (wire type 2). A packed run must end exactly at the end of its last varint.
func packedVarint(b []byte, typ protowire.Type) (int, error) {
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

// validUTF8 is utf8.Valid with the all-ASCII case, nearly every OTLP string, checked eight bytes
// at a time in place: the strings are short and many, and the call overhead was most of the cost.
func validUTF8(b []byte) bool {
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
