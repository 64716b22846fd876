package uds

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
)

var (
	seriesOverflow = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_series_overflow_total",
		Help: "Measurements aggregated into a view's overflow series because the view reached -uds.max-series tag sets.",
	})
	seriesGlobalOverflow = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_series_total_overflow_total",
		Help: "Measurements aggregated into a view's overflow series because all processes together held -uds.max-series-total series.",
	})
)

// seriesBudget caps the series of every view of every process of one server together. n counts
// the series created since the exporter last counted them all (recount), so it never
// under-counts what exists for long: series go away only with their process or view, after an
// export, and the exporter then recounts.
type seriesBudget struct {
	n   atomic.Int64
	max int64
}

// take reserves one series; false when the budget is spent. Safe for concurrent use.
func (b *seriesBudget) take() bool {
	if b == nil {
		return true
	}
	if b.n.Add(1) > b.max {
		b.n.Add(-1)
		return false
	}
	return true
}

// attrOverflow marks the series that collects tag sets beyond the limit, as OpenTelemetry SDKs
// do.
const attrOverflow = "otel.metric.overflow"

// value is one measurement: ints keep their exact value next to the float used by
// distributions; has is false for measures of unknown type, which only count.
type value struct {
	i     int64
	f     float64
	isInt bool
	has   bool
}

// view aggregates one measure per tag set.
type view struct {
	name, desc string
	measure    *measure
	keys       []string
	agg        ocdaemon.Aggregation
	bounds     []float64
	maxSeries  int
	budget     *seriesBudget // shared by every view of the server; nil: no global cap

	mu struct {
		sync.Mutex
		series   map[string]*series
		overflow *series
	}
}

func newView(d *ocdaemon.View, m *measure, maxSeries int, budget *seriesBudget) *view {
	v := &view{
		name: toString(d.Name), desc: toString(d.Description), measure: m,
		agg: d.Aggregation, bounds: slices.Clone(d.Bounds), maxSeries: maxSeries, budget: budget,
	}
	for _, k := range d.TagKeys {
		v.keys = append(v.keys, toString(k))
	}
	v.mu.series = make(map[string]*series)
	return v
}

// sameDefinition reports whether d describes v: re-creation of an identical view is not an
// error.
func (v *view) sameDefinition(d *ocdaemon.View, m *measure) bool {
	if v.measure != m || v.name != string(d.Name) || v.desc != string(d.Description) ||
		v.agg != d.Aggregation || len(v.keys) != len(d.TagKeys) || !slices.Equal(v.bounds, d.Bounds) {
		return false
	}
	for i, k := range d.TagKeys {
		if v.keys[i] != string(k) {
			return false
		}
	}
	return true
}

// series is the aggregate of one tag set.
type series struct {
	attrs []kv // the view's tag keys present in the tag set, in view order
	start int64
	count uint64
	sumI  int64
	sumF  float64
	lastI int64
	lastF float64
	min   float64
	max   float64
	// negative is set once a negative value entered a sum: the sum is then not monotonic.
	negative bool
	buckets  []uint64
	// exemplars: one per bucket for distributions, else one; nil until an attachment arrives.
	exemplars []exemplar
}

type kv struct{ k, v string }

// exemplar is the last measurement that carried attachments.
type exemplar struct {
	set   bool
	isInt bool
	i     int64
	f     float64
	t     int64
	// attachments, encoded as uvarint-length-prefixed key and value pairs; the buffer is reused.
	attachments []byte
}

// appendSeriesKey encodes the values of keys in tags: per key a presence byte, then the
// length-prefixed value. A missing tag differs from an empty one.
func appendSeriesKey(dst []byte, keys []string, tags []ocdaemon.Tag) []byte {
	for _, k := range keys {
		found := false
		for j := range tags {
			if string(tags[j].Key) == k {
				dst = append(dst, 1)
				dst = binary.AppendUvarint(dst, uint64(len(tags[j].Value)))
				dst = append(dst, tags[j].Value...)
				found = true
				break
			}
		}
		if !found {
			dst = append(dst, 0)
		}
	}
	return dst
}

// record aggregates val for the tag set of tags. key is scratch space, returned grown.
// seriesCount is the number of tag-set series the view holds. Safe for concurrent use.
func (v *view) seriesCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.mu.series)
}

// Safe for concurrent use.
func (v *view) record(key []byte, val value, tags, attachments []ocdaemon.Tag, t int64) []byte {
	key = appendSeriesKey(key[:0], v.keys, tags)
	v.mu.Lock()
	s := v.mu.series[string(key)]
	if s == nil {
		s = v.newSeriesLocked(key, tags, t)
	}
	bucket := s.add(v, val)
	if len(attachments) > 0 {
		if s.exemplars == nil {
			s.exemplars = make([]exemplar, max(1, len(s.buckets)))
		}
		e := &s.exemplars[bucket]
		e.set, e.isInt, e.i, e.f, e.t = true, val.isInt, val.i, val.f, t
		e.attachments = e.attachments[:0]
		for _, a := range attachments {
			e.attachments = binary.AppendUvarint(e.attachments, uint64(len(a.Key)))
			e.attachments = append(e.attachments, a.Key...)
			e.attachments = binary.AppendUvarint(e.attachments, uint64(len(a.Value)))
			e.attachments = append(e.attachments, a.Value...)
		}
	}
	v.mu.Unlock()
	return key
}

func (v *view) newSeriesLocked(key []byte, tags []ocdaemon.Tag, t int64) *series {
	full := len(v.mu.series) >= v.maxSeries
	if full {
		seriesOverflow.Inc()
	} else if !v.budget.take() {
		full = true
		seriesGlobalOverflow.Inc()
	}
	if full {
		if v.mu.overflow == nil {
			v.mu.overflow = v.newSeries(t)
		}
		return v.mu.overflow
	}
	s := v.newSeries(t)
	for _, k := range v.keys {
		for j := range tags {
			if string(tags[j].Key) == k {
				s.attrs = append(s.attrs, kv{k: k, v: toString(tags[j].Value)})
				break
			}
		}
	}
	v.mu.series[string(key)] = s
	return s
}

func (v *view) newSeries(t int64) *series {
	s := &series{start: t, min: math.Inf(1), max: math.Inf(-1)}
	if v.agg == ocdaemon.AggregationDistribution {
		s.buckets = make([]uint64, len(v.bounds)+1)
	}
	return s
}

// add aggregates val and returns the index of its exemplar slot.
func (s *series) add(v *view, val value) int {
	s.count++
	switch v.agg {
	case ocdaemon.AggregationSum:
		if val.isInt {
			s.sumI = saturatingAdd(s.sumI, val.i)
		} else {
			s.sumF += val.f
			if val.f < 0 {
				s.negative = true
			}
		}
	case ocdaemon.AggregationLastValue:
		s.lastI, s.lastF = val.i, val.f
	case ocdaemon.AggregationDistribution:
		b := bucketOf(v.bounds, val.f)
		s.buckets[b]++
		s.sumF += val.f
		s.min = math.Min(s.min, val.f)
		s.max = math.Max(s.max, val.f)
		return b
	}
	return 0
}

// bucketOf returns the OTLP bucket of f: bucket i holds bounds[i-1] < f <= bounds[i].
func bucketOf(bounds []float64, f float64) int {
	lo, hi := 0, len(bounds)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bounds[mid] < f {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func saturatingAdd(a, b int64) int64 {
	c := a + b
	if b > 0 && c < a {
		return math.MaxInt64
	}
	return c
}

// seriesSnapshot is a series copied out under the view lock, for building OTLP without holding
// it.
type seriesSnapshot struct {
	series
	overflow bool
}

// snapshot copies the view's series, ordered by tag values, overflow last. Safe for concurrent
// use.
func (v *view) snapshot() []seriesSnapshot {
	v.mu.Lock()
	out := make([]seriesSnapshot, 0, len(v.mu.series)+1)
	for _, s := range v.mu.series {
		out = append(out, seriesSnapshot{series: s.clone()})
	}
	if v.mu.overflow != nil {
		out = append(out, seriesSnapshot{series: v.mu.overflow.clone(), overflow: true})
	}
	v.mu.Unlock()
	slices.SortStableFunc(out, func(a, b seriesSnapshot) int {
		if a.overflow != b.overflow {
			if a.overflow {
				return 1
			}
			return -1
		}
		for i := 0; i < len(a.attrs) && i < len(b.attrs); i++ {
			if c := strings.Compare(a.attrs[i].k, b.attrs[i].k); c != 0 {
				return c
			}
			if c := strings.Compare(a.attrs[i].v, b.attrs[i].v); c != 0 {
				return c
			}
		}
		return len(a.attrs) - len(b.attrs)
	})
	return out
}

func (s *series) clone() series {
	c := *s
	c.buckets = slices.Clone(s.buckets)
	c.exemplars = slices.Clone(s.exemplars)
	for i := range c.exemplars {
		c.exemplars[i].attachments = slices.Clone(s.exemplars[i].attachments)
	}
	return c
}
