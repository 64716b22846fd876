package kafka

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
)

var (
	errNotMetricsData = errors.New("kafka: payload is not OTLP MetricsData")
	// errLabelledTooLarge: the client labels, added to every resource entry the push keeps,
	// would take the body past its bound. A client sends one resource per push; a payload of
	// thousands of tiny entries would otherwise make each of them cost a label set.
	errLabelledTooLarge = errors.New("kafka: labelled payload exceeds its bound")
)

// forward keeps the metrics of a decompressed MetricsData that p subscribes to, sets the client
// labels on every resource and hands the result to next. It returns the data points handed
// over and whether anything was (a push whose metrics are all filtered out sends nothing).
// errNotMetricsData means the payload does not decode; errLabelledTooLarge that the labelled
// body would exceed limit bytes; any other error is next's.
//
// A payload the full-depth scan accepts is rewritten on the wire (rewrite.go) and costs no
// allocation; any other one goes through forwardDecoded, which decides as a decoder does, and
// also refuses what the OpenTelemetry Collector's decoder would (collectorRefuses): such a
// payload would cost the batch it joins. Otherwise the scan is stricter than the decoder in
// refusing group wire types, nesting beyond fastpath.MaxNesting, a few malformed varints and
// packed runs, and strings that are not UTF-8; those payloads keep their old fate.
//
// The body buffer starts at what one labelled resource needs and grows only as entries are
// kept, never past limit: its size follows what is written, not what the payload announces.
func forward(next pipeline.Consumer, data []byte, p *plan, attrs []*commonv1.KeyValue, limit int) (int, bool, error) {
	if _, err := fastpath.ScanRequest(fastpath.Metrics, data, fastpath.LayoutV1, fastpath.DepthFull); err != nil {
		return forwardDecoded(next, data, p, attrs, limit)
	}
	// Fields other than resource_metrics mean the bytes merely parse as protobuf.
	for it := fastpath.NewTopLevel(data); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != 1 {
			return 0, false, errNotMetricsData
		}
	}
	labels := labelBytes(attrs)
	bp := pool.GetBytes(min(limit, len(data)+labels+entryRoom))
	held := noteBuffered(cap(*bp))
	defer func() {
		noteBuffered(-held)
		pool.PutBytes(bp)
	}()
	st := rewriteState{plan: p, attrs: attrs}
	for it := fastpath.NewTopLevel(data); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		rm := data[f.Value:f.End]
		if !st.keepsAny(rm) {
			continue
		}
		// An entry written out is at most its own bytes, one label set and the room its
		// length prefixes take while open.
		need := len(*bp) + (f.End - f.Tag) + labels + entryRoom
		if need > limit {
			return 0, false, errLabelledTooLarge
		}
		if need > cap(*bp) {
			grown := pool.GetBytes(min(limit, max(need, 2*cap(*bp))))
			*grown = append(*grown, *bp...)
			pool.PutBytes(bp)
			bp = grown
			held += noteBuffered(cap(*bp) - held)
		}
		*bp, _ = st.appendResourceMetrics(*bp, rm)
	}
	body := *bp
	if len(body) == 0 {
		return 0, false, nil
	}
	if err := next.Consume(pipeline.Request{Signal: fastpath.Metrics, Body: body, Items: st.points}); err != nil {
		return st.points, false, err
	}
	return st.points, true, nil
}

// entryRoom is what writing one resource entry may add to its own bytes besides the labels:
// a Resource header where it had none, and the reserve of the three length prefixes open at
// once (entry, resource or scope, metric list).
const entryRoom = 4*lenPrefixRoom + 8

// labelBytes is the encoded size of the client labels as Resource attributes.
func labelBytes(attrs []*commonv1.KeyValue) int {
	n := 0
	for _, kv := range attrs {
		sz := kv.SizeVT()
		n += 1 + protowire.SizeVarint(uint64(sz)) + sz
	}
	return n
}

// forwardDecoded is forward by decoding into objects, for the payloads the scan refuses.
//
// MetricsData and ExportMetricsServiceRequest share field 1 (resource_metrics), so the payload
// decodes as the request type, whose pool keeps the top-level objects between pushes.
func forwardDecoded(next pipeline.Consumer, data []byte, p *plan, attrs []*commonv1.KeyValue, limit int) (int, bool, error) {
	req := colmetricsv1.ExportMetricsServiceRequestFromVTPool()
	defer req.ReturnToVTPool()
	if err := req.UnmarshalVT(data); err != nil {
		return 0, false, errNotMetricsData
	}
	// Fields other than resource_metrics mean the bytes merely parse as protobuf.
	if len(req.ProtoReflect().GetUnknown()) > 0 {
		return 0, false, errNotMetricsData
	}
	for _, rm := range req.ResourceMetrics {
		if collectorRefuses(rm) {
			return 0, false, errNotMetricsData
		}
	}

	points, size := 0, 0
	for _, rm := range req.ResourceMetrics {
		n := filterScopes(rm, p)
		if len(rm.ScopeMetrics) == 0 {
			continue
		}
		points += n
		relabel(rm, attrs)
		sz := rm.SizeVT()
		size += 1 + protowire.SizeVarint(uint64(sz)) + sz
	}
	if size == 0 {
		return 0, false, nil
	}
	if size > limit {
		return 0, false, errLabelledTooLarge
	}

	// Encode as the body of an ExportMetricsServiceRequest: one field-1 entry per resource
	// that kept something. The pooled request's slice is skipped over, never compacted: its
	// backing array is reused by the next decode.
	bp := pool.GetBytes(size)
	held := noteBuffered(cap(*bp))
	defer func() {
		noteBuffered(-held)
		pool.PutBytes(bp)
	}()
	body := (*bp)[:0]
	for _, rm := range req.ResourceMetrics {
		if len(rm.ScopeMetrics) == 0 {
			continue
		}
		sz := rm.SizeVT()
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendVarint(body, uint64(sz))
		at := len(body)
		body = body[:at+sz]
		if _, err := rm.MarshalToSizedBufferVT(body[at:]); err != nil {
			panic("BUG: marshal into a buffer of SizeVT bytes failed: " + err.Error())
		}
	}
	*bp = body
	if len(body) != size {
		panic("BUG: encoded resource metrics size differs from SizeVT")
	}
	if err := next.Consume(pipeline.Request{Signal: fastpath.Metrics, Body: body, Items: points}); err != nil {
		return points, false, err
	}
	return points, true, nil
}

// filterScopes drops the metrics p does not subscribe to, and the scopes left empty. It
// returns the data points kept.
func filterScopes(rm *metricsv1.ResourceMetrics, p *plan) int {
	points := 0
	scopes := rm.ScopeMetrics[:0]
	for _, sm := range rm.ScopeMetrics {
		if sm == nil {
			continue
		}
		kept := sm.Metrics[:0]
		for _, m := range sm.Metrics {
			if m != nil && p.keep(m.Name) {
				kept = append(kept, m)
				points += dataPoints(m)
			}
		}
		clear(sm.Metrics[len(kept):])
		sm.Metrics = kept
		if len(kept) > 0 {
			scopes = append(scopes, sm)
		}
	}
	clear(rm.ScopeMetrics[len(scopes):])
	rm.ScopeMetrics = scopes
	return points
}

// relabel replaces any client-sent attribute named like one of the client labels and appends
// the labels. attrs is shared between pushes: it is referenced, never modified.
func relabel(rm *metricsv1.ResourceMetrics, attrs []*commonv1.KeyValue) {
	if rm.Resource == nil {
		rm.Resource = &resourcev1.Resource{}
	}
	kept := rm.Resource.Attributes[:0]
	for _, kv := range rm.Resource.Attributes {
		if kv != nil && labelIndex(kv.Key) < 0 {
			kept = append(kept, kv)
		}
	}
	clear(rm.Resource.Attributes[len(kept):])
	rm.Resource.Attributes = append(kept, attrs...)
}

// dataPoints counts the points of m, the item count of a metrics payload.
func dataPoints(m *metricsv1.Metric) int {
	switch d := m.Data.(type) {
	case *metricsv1.Metric_Gauge:
		return len(d.Gauge.GetDataPoints())
	case *metricsv1.Metric_Sum:
		return len(d.Sum.GetDataPoints())
	case *metricsv1.Metric_Histogram:
		return len(d.Histogram.GetDataPoints())
	case *metricsv1.Metric_ExponentialHistogram:
		return len(d.ExponentialHistogram.GetDataPoints())
	case *metricsv1.Metric_Summary:
		return len(d.Summary.GetDataPoints())
	}
	return 0
}

// collectorRefuses reports whether the Collector's decoder would refuse rm where UnmarshalVT
// took it: an exemplar's trace id neither empty nor 16 bytes or span id neither empty nor 8, or
// a field 1000 (the scope entries of OTLP before 0.19, unknown to our types, kept as unknown
// bytes and written out again) malformed as a scope entry. The full-depth scan refuses both on
// the wire; this is the same rule for the payloads that reach the decoder for another reason.
// Cold path: it may allocate.
func collectorRefuses(rm *metricsv1.ResourceMetrics) bool {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.GetMetrics() {
			var ex [][]*metricsv1.Exemplar
			for _, dp := range m.GetGauge().GetDataPoints() {
				ex = append(ex, dp.GetExemplars())
			}
			for _, dp := range m.GetSum().GetDataPoints() {
				ex = append(ex, dp.GetExemplars())
			}
			for _, dp := range m.GetHistogram().GetDataPoints() {
				ex = append(ex, dp.GetExemplars())
			}
			for _, dp := range m.GetExponentialHistogram().GetDataPoints() {
				ex = append(ex, dp.GetExemplars())
			}
			for _, list := range ex {
				for _, e := range list {
					if t, s := len(e.GetTraceId()), len(e.GetSpanId()); t != 0 && t != 16 || s != 0 && s != 8 {
						return true
					}
				}
			}
		}
	}
	for unknown := rm.ProtoReflect().GetUnknown(); len(unknown) > 0; {
		num, typ, n := protowire.ConsumeTag(unknown)
		m := protowire.ConsumeFieldValue(num, typ, unknown[max(n, 0):])
		if n < 0 || m < 0 {
			return true // UnmarshalVT kept it whole; this cannot happen
		}
		if num == 1000 {
			// Scanned in an entry of its own, where it sits at the same depth.
			entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), unknown[:n+m])
			if _, err := fastpath.ScanRequest(fastpath.Metrics, entry, fastpath.LayoutV1, fastpath.DepthFull); err != nil && !collectorTakes(err) {
				return true
			}
		}
		unknown = unknown[n+m:]
	}
	return false
}

// collectorTakes reports whether err is one of the scan's refusals that the Collector's decoder
// does not share (fastpath's FuzzPdata* tests list them): strings that are not UTF-8, groups,
// nesting past the cap, overflowing 10-byte varints, field numbers above 2^29-1.
func collectorTakes(err error) bool {
	for _, e := range []error{fastpath.ErrUTF8, fastpath.ErrGroup, fastpath.ErrNesting, fastpath.ErrVarintOverflow, fastpath.ErrFieldNumber} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
