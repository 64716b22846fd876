package kafka

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
)

// The wire-level rewrite of a push: what forward does with decoded objects, done on the
// encoded MetricsData instead, so that an accepted push allocates nothing for its metrics.
//
// It relies on the payload having passed fastpath.ScanRequest at DepthFull, which accepts only
// what UnmarshalVT accepts: every known field then has its schema's wire type and every nested
// message walks cleanly. What it writes decodes to exactly what the decoded path would have
// encoded (the decoded path's output is the canonical encoding of the same objects):
//  1. Fields are copied verbatim, in their order; only metrics not subscribed to, scopes left
//     without metrics and resources left without scopes are dropped.
//  2. A resource's occurrences (protobuf merges repeated occurrences of a message field) are
//     written as one Resource with their fields concatenated, which is that merge, minus the
//     attributes named like a client label, plus the labels at the end.
//  3. A metric's name is its last field 1 and its data its last oneof member, merged with
//     earlier occurrences of that same member, as a decoder sees them.

// Field numbers of the OTLP messages the rewrite opens.
const (
	fieldRMResource     = 1 // ResourceMetrics.resource
	fieldRMScopeMetrics = 2 // ResourceMetrics.scope_metrics
	fieldSMMetrics      = 2 // ScopeMetrics.metrics
	fieldMetricName     = 1 // Metric.name
	fieldResourceAttrs  = 1 // Resource.attributes
	fieldKVKey          = 1 // KeyValue.key
	fieldDataPoints     = 1 // data_points of every metric data message
)

// isDataField reports whether n is a member of Metric's data oneof (gauge, sum, histogram,
// exponential_histogram, summary).
func isDataField(n protowire.Number) bool {
	switch n {
	case 5, 7, 9, 10, 11:
		return true
	}
	return false
}

// lenPrefixRoom is the room reserved for a length prefix before the size of what follows is
// known: a varint of a size below 2^35, far above any payload the intake admits.
const lenPrefixRoom = 5

// beginLen appends a field tag and room for its length, and returns where the room starts.
func beginLen(dst []byte, num protowire.Number) ([]byte, int) {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	at := len(dst)
	return append(dst, make([]byte, lenPrefixRoom)...), at
}

// endLen writes the length of what follows the room at at and closes the unused room.
func endLen(dst []byte, at int) []byte {
	n := len(dst) - at - lenPrefixRoom
	w := protowire.SizeVarint(uint64(n))
	protowire.AppendVarint(dst[at:at], uint64(n))
	copy(dst[at+w:], dst[at+lenPrefixRoom:])
	return dst[:at+w+n]
}

// rewriteState is what one push's rewrite shares between its levels.
type rewriteState struct {
	plan   *plan
	attrs  []*commonv1.KeyValue
	points int
}

// appendResourceMetrics appends, as a field 1 entry of the request, the resource entry rm
// filtered and labelled, and reports whether anything of it was kept (if not, dst is returned
// unchanged).
func (st *rewriteState) appendResourceMetrics(dst, rm []byte) ([]byte, bool) {
	start := len(dst)
	dst, outer := beginLen(dst, 1)
	// The one Resource, first: the merge of every occurrence, then the labels.
	dst, res := beginLen(dst, fieldRMResource)
	for it := fastpath.NewTopLevel(rm); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num == fieldRMResource {
			dst = appendResourceFields(dst, rm[f.Value:f.End])
		}
	}
	for _, kv := range st.attrs {
		sz := kv.SizeVT()
		dst = protowire.AppendTag(dst, fieldResourceAttrs, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sz))
		at := len(dst)
		dst = append(dst, make([]byte, sz)...)
		if _, err := kv.MarshalToSizedBufferVT(dst[at:]); err != nil {
			panic("BUG: marshal of a client label into SizeVT bytes failed: " + err.Error())
		}
	}
	dst = endLen(dst, res)
	kept := false
	for it := fastpath.NewTopLevel(rm); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		switch f.Num {
		case fieldRMResource:
		case fieldRMScopeMetrics:
			var k bool
			if dst, k = st.appendScopeMetrics(dst, rm[f.Value:f.End]); k {
				kept = true
			}
		default:
			dst = append(dst, rm[f.Tag:f.End]...)
		}
	}
	if !kept {
		return dst[:start], false
	}
	return endLen(dst, outer), true
}

// keepsAny reports whether the resource entry rm holds a metric the plan subscribes to, that
// is, whether appendResourceMetrics would keep it: an entry it would drop is skipped before its
// resource and labels are written.
func (st *rewriteState) keepsAny(rm []byte) bool {
	for it := fastpath.NewTopLevel(rm); ; {
		f, ok := it.Next()
		if !ok {
			return false
		}
		if f.Num != fieldRMScopeMetrics {
			continue
		}
		sm := rm[f.Value:f.End]
		for it := fastpath.NewTopLevel(sm); ; {
			g, ok := it.Next()
			if !ok {
				break
			}
			if g.Num != fieldSMMetrics {
				continue
			}
			if name, _ := metricNamePoints(sm[g.Value:g.End]); st.plan.keepBytes(name) {
				return true
			}
		}
	}
}

// appendResourceFields appends the fields of one Resource occurrence but the attributes named
// like a client label.
func appendResourceFields(dst, res []byte) []byte {
	for it := fastpath.NewTopLevel(res); ; {
		f, ok := it.Next()
		if !ok {
			return dst
		}
		if f.Num == fieldResourceAttrs && isLabelKV(res[f.Value:f.End]) {
			continue
		}
		dst = append(dst, res[f.Tag:f.End]...)
	}
}

// isLabelKV reports whether the encoded KeyValue kv has a key named like a client label.
func isLabelKV(kv []byte) bool {
	var key []byte
	for it := fastpath.NewTopLevel(kv); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num == fieldKVKey {
			key = kv[f.Value:f.End]
		}
	}
	for _, n := range labelNames {
		if string(key) == n {
			return true
		}
	}
	return false
}

// appendScopeMetrics appends the scope entry sm with only its subscribed metrics, and reports
// whether any was kept (if not, dst is returned unchanged).
func (st *rewriteState) appendScopeMetrics(dst, sm []byte) ([]byte, bool) {
	start := len(dst)
	dst, at := beginLen(dst, fieldRMScopeMetrics)
	kept := false
	for it := fastpath.NewTopLevel(sm); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num == fieldSMMetrics {
			m := sm[f.Value:f.End]
			name, points := metricNamePoints(m)
			if !st.plan.keepBytes(name) {
				continue
			}
			st.points += points
			kept = true
		}
		dst = append(dst, sm[f.Tag:f.End]...)
	}
	if !kept {
		return dst[:start], false
	}
	return endLen(dst, at), true
}

// metricNamePoints returns the name of the encoded Metric m and its data points, as a decoder
// sees them.
func metricNamePoints(m []byte) (name []byte, points int) {
	var member protowire.Number
	for it := fastpath.NewTopLevel(m); ; {
		f, ok := it.Next()
		if !ok {
			return name, points
		}
		switch {
		case f.Num == fieldMetricName:
			name = m[f.Value:f.End]
		case isDataField(f.Num):
			if f.Num != member {
				// Another member replaces the data; the same one merges into it.
				member, points = f.Num, 0
			}
			points += countField(m[f.Value:f.End], fieldDataPoints)
		}
	}
}

// countField counts the occurrences of field num in the encoded message b.
func countField(b []byte, num protowire.Number) int {
	n := 0
	for it := fastpath.NewTopLevel(b); ; {
		f, ok := it.Next()
		if !ok {
			return n
		}
		if f.Num == num {
			n++
		}
	}
}
