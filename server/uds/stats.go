package uds

import (
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
)

// rejectReason says why a stats message (or one measurement of a STATS_RECORD) had no effect.
type rejectReason uint8

const (
	// rejectUnknownMeasure: a record or view names a measure the process never created.
	rejectUnknownMeasure rejectReason = iota
	// rejectTypeMismatch: a measurement's type differs from its measure's.
	rejectTypeMismatch
	// rejectBadValue: NaN, infinity, or an int beyond int64.
	rejectBadValue
	// rejectNoView: no registered view aggregates the measure (OpenCensus drops these too).
	rejectNoView
	// rejectNoValue: a value-less measurement (unknown measure type) for a view that needs one.
	rejectNoValue
	// rejectProcessLimit: the process could not get stats state (-uds.max-processes).
	rejectProcessLimit
	// rejectDefinitionLimit: too many measures or views in one process.
	rejectDefinitionLimit
	// rejectConflict: a measure or view re-created under its name with a different definition.
	rejectConflict
	// rejectInvalid: an empty name, aggregation none, unsorted bounds, a bad period.
	rejectInvalid
	// rejectUnknownView: VIEW_UNREGISTER of a view that is not registered.
	rejectUnknownView
	// rejectTooLong: a name, description, unit, tag key, tag value or attachment longer than
	// -uds.max-string-bytes.
	rejectTooLong
	numRejectReasons
)

var rejectNames = [numRejectReasons]string{
	"unknown_measure", "type_mismatch", "bad_value", "no_view", "no_value", "process_limit",
	"definition_limit", "conflict", "invalid", "unknown_view", "too_long",
}

var (
	statsRejectedVec = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_uds_stats_rejected_total",
		Help: "Stats definitions and measurements from OpenCensus clients that had no effect, by reason.",
	}, []string{"reason"})
	statsRejected = func() (c [numRejectReasons]prometheus.Counter) {
		for i := range c {
			c[i] = statsRejectedVec.WithLabelValues(rejectNames[i])
		}
		return c
	}()
	measurementsRecorded = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_measurements_total",
		Help: "Measurements aggregated into at least one view.",
	})
)

// maxTagKeys and maxBounds cap a view definition: the client sends what PHP code declared, and a
// hostile or broken one must not size the aggregator.
const (
	maxTagKeys = 64
	maxBounds  = 1024
)

// measure is a MEASURE_CREATE definition.
type measure struct {
	name, desc, unit string
	typ              ocdaemon.MeasureType
	// views aggregating this measure; guarded by process.mu.
	views []*view
}

// createMeasure handles MEASURE_CREATE. The client re-creates every measure on every request of
// a persistent connection: an identical definition is a no-op.
func (p *process) createMeasure(m *ocdaemon.Measure) {
	if len(m.Name) == 0 {
		statsRejected[rejectInvalid].Inc()
		return
	}
	if p.tooLong(m.Name) || p.tooLong(m.Description) || p.tooLong(m.Unit) {
		statsRejected[rejectTooLong].Inc()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.mu.measures[string(m.Name)]; old != nil {
		if old.typ != m.Type || old.desc != string(m.Description) || old.unit != string(m.Unit) {
			statsRejected[rejectConflict].Inc()
		}
		return
	}
	if len(p.mu.measures) >= p.limits.maxMeasures {
		statsRejected[rejectDefinitionLimit].Inc()
		return
	}
	p.mu.measures[string(m.Name)] = &measure{
		name: toString(m.Name), desc: toString(m.Description), unit: toString(m.Unit), typ: m.Type,
	}
}

// registerViews handles VIEW_REGISTER. Re-registering an identical view is a no-op; an identical
// view that was unregistered but not yet exported for the last time is revived with its
// aggregates, so per-request register/unregister cycles keep one cumulative series.
func (p *process) registerViews(vs *ocdaemon.Views) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range vs.Views {
		d := &vs.Views[i]
		if reason, ok := validView(d); !ok {
			statsRejected[reason].Inc()
			continue
		}
		if p.viewTooLong(d) {
			statsRejected[rejectTooLong].Inc()
			continue
		}
		m := p.mu.measures[string(d.Measure)]
		if m == nil {
			statsRejected[rejectUnknownMeasure].Inc()
			continue
		}
		if old := p.mu.views[string(d.Name)]; old != nil {
			if !old.sameDefinition(d, m) {
				statsRejected[rejectConflict].Inc()
			}
			continue
		}
		if j := slices.IndexFunc(p.mu.retired, func(v *view) bool { return v.name == string(d.Name) && v.sameDefinition(d, m) }); j >= 0 {
			v := p.mu.retired[j]
			p.mu.retired = slices.Delete(p.mu.retired, j, j+1)
			p.mu.views[v.name] = v
			m.views = append(m.views, v)
			continue
		}
		if len(p.mu.views) >= p.limits.maxViews {
			statsRejected[rejectDefinitionLimit].Inc()
			continue
		}
		v := newView(d, m, p.limits.maxSeries, p.limits.budget)
		p.mu.views[v.name] = v
		m.views = append(m.views, v)
	}
}

func validView(d *ocdaemon.View) (rejectReason, bool) {
	if len(d.Name) == 0 || len(d.TagKeys) > maxTagKeys || len(d.Bounds) > maxBounds {
		return rejectInvalid, false
	}
	switch d.Aggregation {
	case ocdaemon.AggregationCount, ocdaemon.AggregationSum, ocdaemon.AggregationLastValue:
	case ocdaemon.AggregationDistribution:
		for i, b := range d.Bounds {
			if math.IsNaN(b) || math.IsInf(b, 0) || (i > 0 && b <= d.Bounds[i-1]) {
				return rejectInvalid, false
			}
		}
	default:
		return rejectInvalid, false
	}
	return 0, true
}

// unregisterViews handles VIEW_UNREGISTER: the views stop aggregating at once and are exported
// one last time with what they hold.
func (p *process) unregisterViews(names *ocdaemon.Names) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names.Names {
		v := p.mu.views[string(n)]
		if v == nil {
			statsRejected[rejectUnknownView].Inc()
			continue
		}
		delete(p.mu.views, v.name)
		v.measure.views = slices.DeleteFunc(v.measure.views, func(x *view) bool { return x == v })
		p.mu.retired = append(p.mu.retired, v)
	}
}

// record aggregates a STATS_RECORD into every view of its measures. t is the client's time of
// the record in Unix nanoseconds; key is scratch space owned by the caller, returned grown.
// It does not allocate once the series and exemplar buffers it touches exist.
func (p *process) record(rec *ocdaemon.Record, t int64, key []byte) []byte {
	if p.tagsTooLong(rec.Tags) || p.tagsTooLong(rec.Attachments) {
		// Tag values become series keys and attachments exemplars, both kept until the next
		// export: the whole record is refused, one count per measurement.
		statsRejected[rejectTooLong].Add(float64(len(rec.Measurements)))
		return key
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i := range rec.Measurements {
		ms := &rec.Measurements[i]
		m := p.mu.measures[string(ms.Name)]
		if m == nil {
			statsRejected[rejectUnknownMeasure].Inc()
			continue
		}
		if ms.Type != m.typ {
			statsRejected[rejectTypeMismatch].Inc()
			continue
		}
		var val value
		switch ms.Type {
		case ocdaemon.MeasureInt:
			if ms.Int > math.MaxInt64 {
				statsRejected[rejectBadValue].Inc()
				continue
			}
			val = value{i: int64(ms.Int), f: float64(ms.Int), isInt: true, has: true}
		case ocdaemon.MeasureFloat:
			if math.IsNaN(ms.Float) || math.IsInf(ms.Float, 0) {
				statsRejected[rejectBadValue].Inc()
				continue
			}
			val = value{f: ms.Float, has: true}
		}
		if len(m.views) == 0 {
			statsRejected[rejectNoView].Inc()
			continue
		}
		recorded := false
		for _, v := range m.views {
			if !val.has && v.agg != ocdaemon.AggregationCount {
				statsRejected[rejectNoValue].Inc()
				continue
			}
			key = v.record(key, val, rec.Tags, rec.Attachments, t)
			recorded = true
		}
		if recorded {
			measurementsRecorded.Inc()
		}
	}
	return key
}

// tooLong reports whether b is longer than the process's string cap.
func (p *process) tooLong(b []byte) bool {
	return p.limits.maxString > 0 && len(b) > p.limits.maxString
}

func (p *process) viewTooLong(d *ocdaemon.View) bool {
	if p.tooLong(d.Name) || p.tooLong(d.Description) || p.tooLong(d.Measure) {
		return true
	}
	for _, k := range d.TagKeys {
		if p.tooLong(k) {
			return true
		}
	}
	return false
}

func (p *process) tagsTooLong(tags []ocdaemon.Tag) bool {
	for i := range tags {
		if p.tooLong(tags[i].Key) || p.tooLong(tags[i].Value) {
			return true
		}
	}
	return false
}
