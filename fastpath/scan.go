package fastpath

import (
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
	// a nesting cap (MaxNesting), that every string field is UTF-8, as protobuf-go requires
	// (ErrUTF8), and that trace and span ids are empty or of their size, as the OpenTelemetry
	// Collector's decoder requires (ErrIDLength), as well as field 1000 of a resource entry,
	// which that decoder reads (see fLegacy). A request DepthFull accepts is one UnmarshalVT of
	// our types, protobuf-go and the Collector's decoder (pdata) accept; the shallower depths
	// let through requests an upstream refuses, and with them the batch they join.
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
	// NumLayouts is the number of layouts.
	NumLayouts
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
				items, err := walkEntry(root, b[f.Value:f.End], full)
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
