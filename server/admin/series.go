package admin

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// sample is what one gathering of the registry yields: the value of every series the status
// reads, by slot of its series set. Its set and values are never changed once it is in the
// ring (a sample is thinned by replacing it), so a copy may be read without the sampler's lock.
type sample struct {
	at   time.Time
	set  *seriesSet
	vals []float64 // by slot of set
}

// seriesSet is the index of one gathering's series: which slot of a sample holds each series,
// and which slots belong to a metric, and to a metric of one destination. The same series come
// back at every sample, so consecutive samples share one set: it is built only when the series
// gathered change, and a sample costs one pass over its series plus a slice of values. Every
// query then visits only the series it sums, which keeps a sample and a status document linear
// in the number of destinations.
//
// Invariants:
//  1. A set is immutable once built, but for thin, which only take writes.
//  2. keys[slot] is the series key ("metric|name=value|..."; see seriesKey) of a counter or
//     gauge slot and of a histogram's first bucket; "" for a histogram's further buckets.
//     Series gathered apart whose keys are equal (labels the status ignores) share a slot and
//     their values add up.
//  3. byMetric and byDest hold counter and gauge slots only; a histogram's slots are in hists.
type seriesSet struct {
	order    []int32 // slot of each series in gather order, status metrics only
	keys     []string
	slotOf   map[string]int32
	byMetric map[string][]int32
	byDest   map[metricDest][]int32
	hists    map[string]histSlots // ack latency buckets by destination
	dests    []string             // destinations with a client series, sorted
	thinned  bool                 // holds the chart series only (thinSet)

	thin     *seriesSet // the set's chart series alone, made on first use (thinSet)
	thinKeep []int32    // slots of this set that thin keeps, by thin's slot
}

type metricDest struct{ metric, dest string }

// histSlots are the slots of a destination's ack latency buckets: first onward, one per bound.
type histSlots struct {
	first int32
	les   []float64
}

// seriesVisits counts the series the status looked at, in samples and in queries: the measure
// of its work that tests hold linear in the number of destinations.
var seriesVisits atomic.Int64

// seriesKey appends the key of a series to b: the metric's name and the labels the status groups
// by (destination, reason, intake, api, outcome, resource), "name|k=v|...".
func seriesKey(b []byte, name string, ls []*dto.LabelPair) []byte {
	b = append(b, name...)
	for _, l := range ls {
		switch l.GetName() {
		case "destination", "reason", "intake", "api", "outcome", "resource", "topic", "partition":
			b = append(append(append(append(b, '|'), l.GetName()...), '='), l.GetValue()...)
		}
	}
	return b
}

// sameSeries reports whether fams holds, in order, the series set was built from. buf is
// scratch space; it returns it grown.
func (set *seriesSet) sameSeries(fams []*dto.MetricFamily, buf []byte) (bool, []byte) {
	i := 0
	for _, f := range fams {
		name := f.GetName()
		if !statusMetrics[name] {
			continue
		}
		for _, m := range f.GetMetric() {
			buf = seriesKey(buf[:0], name, m.GetLabel())
			if i >= len(set.order) || set.keys[set.order[i]] != string(buf) {
				return false, buf
			}
			i++
		}
	}
	return i == len(set.order), buf
}

// buildSeriesSet indexes the series of fams. Keys prev already holds are reused rather than
// made again. buf is scratch space; it returns it grown.
func buildSeriesSet(fams []*dto.MetricFamily, prev *seriesSet, buf []byte) (*seriesSet, []byte) {
	set := &seriesSet{slotOf: map[string]int32{}, byMetric: map[string][]int32{}, byDest: map[metricDest][]int32{},
		hists: map[string]histSlots{}}
	dests := map[string]bool{}
	for _, f := range fams {
		name := f.GetName()
		if !statusMetrics[name] {
			continue
		}
		for _, m := range f.GetMetric() {
			buf = seriesKey(buf[:0], name, m.GetLabel())
			slot, ok := set.slotOf[string(buf)]
			if !ok {
				key, reused := "", false
				if prev != nil {
					if ps, ok := prev.slotOf[string(buf)]; ok {
						key, reused = prev.keys[ps], true
					}
				}
				if !reused {
					key = string(buf)
				}
				slot = int32(len(set.keys))
				set.slotOf[key] = slot
				set.keys = append(set.keys, key)
				dest := labelOf(key, "destination")
				if h := m.GetHistogram(); h != nil {
					les := make([]float64, len(h.GetBucket()))
					for j, b := range h.GetBucket() {
						les[j] = b.GetUpperBound()
					}
					for range max(len(les), 1) - 1 {
						set.keys = append(set.keys, "")
					}
					if _, ok := set.hists[dest]; !ok && len(les) > 0 {
						set.hists[dest] = histSlots{first: slot, les: les}
					}
				} else {
					set.byMetric[name] = append(set.byMetric[name], slot)
					if dest != "" {
						set.byDest[metricDest{name, dest}] = append(set.byDest[metricDest{name, dest}], slot)
						if strings.HasPrefix(name, "otlpgate_client_") {
							dests[dest] = true
						}
					}
				}
			}
			set.order = append(set.order, slot)
		}
	}
	set.dests = make([]string, 0, len(dests))
	for d := range dests {
		set.dests = append(set.dests, d)
	}
	slices.Sort(set.dests)
	return set, buf
}

// fill adds the values of the series of fams, which set indexes (sameSeries or
// buildSeriesSet), into vals.
func (set *seriesSet) fill(fams []*dto.MetricFamily, vals []float64) {
	i := 0
	for _, f := range fams {
		if !statusMetrics[f.GetName()] {
			continue
		}
		for _, m := range f.GetMetric() {
			slot := set.order[i]
			i++
			switch {
			case m.Counter != nil:
				vals[slot] += m.GetCounter().GetValue()
			case m.Gauge != nil:
				vals[slot] += m.GetGauge().GetValue()
			case m.Histogram != nil:
				bs := m.GetHistogram().GetBucket()
				for j := range bs {
					if s := int(slot) + j; s < len(vals) && (j == 0 || set.keys[s] == "") {
						vals[s] += float64(bs[j].GetCumulativeCount())
					}
				}
			}
		}
	}
	seriesVisits.Add(int64(i))
}

// chartMetrics are the metrics the charts read from every sample of the window (history); the
// others are read from the samples of the last minute only.
var chartMetrics = map[string]bool{"otlpgate_fastpath_admitted_items_total": true, "otlpgate_client_acknowledged_items_total": true}

func init() {
	for _, in := range intakeDefs {
		chartMetrics[in.items] = true
	}
}

// thinSample is sm with the chart series only: what a sample older than a minute is kept as.
// Must be called by take, which owns the sets' thin fields.
func thinSample(sm sample) sample {
	set := sm.set
	if set.thinned {
		return sm
	}
	if set.thin == nil {
		t := &seriesSet{slotOf: map[string]int32{}, byMetric: map[string][]int32{}, byDest: map[metricDest][]int32{},
			hists: map[string]histSlots{}, dests: set.dests, thinned: true}
		for slot, key := range set.keys {
			metric, _, _ := strings.Cut(key, "|")
			if key == "" || !chartMetrics[metric] {
				continue
			}
			ts := int32(len(t.keys))
			t.keys = append(t.keys, key)
			t.slotOf[key] = ts
			t.byMetric[metric] = append(t.byMetric[metric], ts)
			if d := labelOf(key, "destination"); d != "" {
				t.byDest[metricDest{metric, d}] = append(t.byDest[metricDest{metric, d}], ts)
			}
			set.thinKeep = append(set.thinKeep, int32(slot))
		}
		set.thin = t
	}
	vals := make([]float64, len(set.thinKeep))
	for i, slot := range set.thinKeep {
		vals[i] = sm.vals[slot]
	}
	return sample{at: sm.at, set: set.thin, vals: vals}
}

// slots returns the slots of metric, of one destination when want names one.
func (set *seriesSet) slots(metric string, want []string) []int32 {
	for _, w := range want {
		if d, ok := strings.CutPrefix(w, "destination="); ok {
			return set.byDest[metricDest{metric, d}]
		}
	}
	return set.byMetric[metric]
}

// matches reports whether key k has every label of want ("k=v").
func matches(k string, want []string) bool {
	for _, w := range want {
		if !containsLabel(k, w) {
			return false
		}
	}
	return true
}

// sum adds the series of metric whose labels include every one of want ("k=v").
func (sm *sample) sum(metric string, want ...string) float64 {
	slots := sm.set.slots(metric, want)
	seriesVisits.Add(int64(len(slots)))
	var n float64
	for _, slot := range slots {
		if matches(sm.set.keys[slot], want) {
			n += sm.vals[slot]
		}
	}
	return n
}

// has reports whether metric has any series in the sample.
func (sm *sample) has(metric string) bool { return len(sm.set.byMetric[metric]) > 0 }

// byLabel splits metric's sum by the values of one label, among series matching want.
func (sm *sample) byLabel(metric, lbl string, want ...string) map[string]float64 {
	slots := sm.set.slots(metric, want)
	seriesVisits.Add(int64(len(slots)))
	out := map[string]float64{}
	for _, slot := range slots {
		if k := sm.set.keys[slot]; matches(k, want) {
			out[labelOf(k, lbl)] += sm.vals[slot]
		}
	}
	return out
}

// destinations returns the destination names with a client series in the sample, sorted.
// The slice is shared: do not modify it.
func (sm *sample) destinations() []string { return sm.set.dests }

// latency returns the cumulative ack latency buckets of destination d, or nil.
func (sm *sample) latency(d string) []bucket {
	h, ok := sm.set.hists[d]
	if !ok {
		return nil
	}
	seriesVisits.Add(int64(len(h.les)))
	out := make([]bucket, len(h.les))
	for i, le := range h.les {
		out[i] = bucket{le: le, count: sm.vals[int(h.first)+i]}
	}
	return out
}

// The key helpers below run on the series a query sums: they compare in place rather than
// build the strings they look for.

// containsLabel reports whether key k has the label kv ("name=value").
func containsLabel(k, kv string) bool {
	for rest := k; ; {
		i := strings.IndexByte(rest, '|')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
		if strings.HasPrefix(rest, kv) && (len(rest) == len(kv) || rest[len(kv)] == '|') {
			return true
		}
	}
}

// labelOf returns the value of label lbl in key k, or "".
func labelOf(k, lbl string) string {
	for rest := k; ; {
		i := strings.IndexByte(rest, '|')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
		if len(rest) > len(lbl) && rest[len(lbl)] == '=' && strings.HasPrefix(rest, lbl) {
			v, _, _ := strings.Cut(rest[len(lbl)+1:], "|")
			return v
		}
	}
}
