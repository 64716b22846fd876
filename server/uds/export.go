package uds

import (
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/fastpath"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
)

var metricExports = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_uds_metric_exports_total",
	Help: "Metric export rounds that handed data points to the data path.",
})

// scope names the instrumentation library that produced what the intake emits. Shared and
// read-only.
var scope = &commonv1.InstrumentationScope{Name: "opencensus-php"}

// runExporter exports each process's views every reporting period, and processes that ended at
// once. It runs on its own goroutine until stop is closed, then exports everything one last
// time.
func (s *Server) runExporter() {
	defer close(s.exportDone)
	for {
		now := s.clock.Now()
		due, next := s.reg.due(now, false)
		s.exportMetrics(due, now)
		var fire <-chan time.Time
		cancel := func() {}
		if !next.IsZero() {
			fire, cancel = s.clock.At(next)
		}
		select {
		case <-fire:
		case <-s.exportWake:
		case <-s.exportStop:
			cancel()
			now = s.clock.Now()
			due, _ = s.reg.due(now, true)
			s.exportMetrics(due, now)
			return
		}
		cancel()
	}
}

// wakeExporter makes the exporter re-read the schedule. Never blocks.
func (s *Server) wakeExporter() {
	select {
	case s.exportWake <- struct{}{}:
	default:
	}
}

// exportMetrics hands the current aggregates of procs to the consumer, one resource per
// process. Retired views leave their process here.
func (s *Server) exportMetrics(procs []*process, now time.Time) {
	if len(procs) == 0 {
		return
	}
	req := colmetricsv1.ExportMetricsServiceRequestFromVTPool()
	defer req.ReturnToVTPool()
	// segments remembers where each resource's encoding ends, to split an export the data path
	// finds too large.
	var segments []int
	var points []int
	buf := getBody(0)
	defer putBody(buf)
	for _, p := range procs {
		rm, n := s.resourceMetrics(p, now)
		if n == 0 {
			continue
		}
		req.ResourceMetrics = append(req.ResourceMetrics[:0], rm)
		size := req.SizeVT()
		start := len(*buf)
		*buf = slices.Grow(*buf, size)[:start+size]
		if _, err := req.MarshalToSizedBufferVT((*buf)[start:]); err != nil {
			panic("BUG: marshal of a built metrics request: " + err.Error())
		}
		segments = append(segments, len(*buf))
		points = append(points, n)
	}
	if len(segments) == 0 {
		return
	}
	metricExports.Inc()
	total := 0
	for _, n := range points {
		total += n
	}
	err := s.next.Consume(fastpath.Metrics, *buf, total)
	if err == fastpath.ErrTooLarge && len(segments) > 1 {
		// One resource at a time may still fit.
		from := 0
		for i, end := range segments {
			s.countConsume(fastpath.Metrics, s.next.Consume(fastpath.Metrics, (*buf)[from:end], points[i]), points[i])
			from = end
		}
		return
	}
	s.countConsume(fastpath.Metrics, err, total)
}

// resourceMetrics builds the metrics of p and the number of data points in them.
func (s *Server) resourceMetrics(p *process, now time.Time) (*metricsv1.ResourceMetrics, int) {
	p.mu.Lock()
	views := make([]*view, 0, len(p.mu.views)+len(p.mu.retired))
	for _, v := range p.mu.views {
		views = append(views, v)
	}
	views = append(views, p.mu.retired...)
	p.mu.retired = nil
	rt := p.mu.runtime
	p.mu.Unlock()
	slices.SortStableFunc(views, func(a, b *view) int { return strings.Compare(a.name, b.name) })

	nowNano := uint64(now.UnixNano())
	sm := &metricsv1.ScopeMetrics{Scope: scope}
	points := 0
	for _, v := range views {
		snap := v.snapshot()
		if len(snap) == 0 {
			continue
		}
		sm.Metrics = append(sm.Metrics, v.metric(snap, nowNano))
		points += len(snap)
	}
	if points == 0 {
		return nil, 0
	}
	return &metricsv1.ResourceMetrics{
		Resource:     s.resource(p.pid, rt),
		ScopeMetrics: []*metricsv1.ScopeMetrics{sm},
	}, points
}

// metric converts a view's snapshot: count and sum become cumulative sums, distribution a
// cumulative histogram, last value a gauge.
func (v *view) metric(snap []seriesSnapshot, now uint64) *metricsv1.Metric {
	m := &metricsv1.Metric{Name: v.name, Description: v.desc, Unit: v.measure.unit}
	isInt := v.measure.typ == ocdaemon.MeasureInt
	switch v.agg {
	case ocdaemon.AggregationCount:
		m.Unit = "1"
		sum := &metricsv1.Sum{AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, IsMonotonic: true}
		for i := range snap {
			dp := numberPoint(&snap[i], now, true)
			dp.Value = &metricsv1.NumberDataPoint_AsInt{AsInt: int64(snap[i].count)}
			sum.DataPoints = append(sum.DataPoints, dp)
		}
		m.Data = &metricsv1.Metric_Sum{Sum: sum}
	case ocdaemon.AggregationSum:
		sum := &metricsv1.Sum{AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, IsMonotonic: true}
		for i := range snap {
			s := &snap[i]
			dp := numberPoint(s, now, true)
			if isInt {
				dp.Value = &metricsv1.NumberDataPoint_AsInt{AsInt: s.sumI}
			} else {
				dp.Value = &metricsv1.NumberDataPoint_AsDouble{AsDouble: s.sumF}
			}
			if s.negative {
				sum.IsMonotonic = false
			}
			sum.DataPoints = append(sum.DataPoints, dp)
		}
		m.Data = &metricsv1.Metric_Sum{Sum: sum}
	case ocdaemon.AggregationLastValue:
		g := &metricsv1.Gauge{}
		for i := range snap {
			s := &snap[i]
			dp := numberPoint(s, now, false)
			if isInt {
				dp.Value = &metricsv1.NumberDataPoint_AsInt{AsInt: s.lastI}
			} else {
				dp.Value = &metricsv1.NumberDataPoint_AsDouble{AsDouble: s.lastF}
			}
			g.DataPoints = append(g.DataPoints, dp)
		}
		m.Data = &metricsv1.Metric_Gauge{Gauge: g}
	case ocdaemon.AggregationDistribution:
		h := &metricsv1.Histogram{AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE}
		for i := range snap {
			s := &snap[i]
			sum, lo, hi := s.sumF, s.min, s.max
			dp := &metricsv1.HistogramDataPoint{
				Attributes:        s.keyValues(),
				StartTimeUnixNano: min(uint64(s.start), now),
				TimeUnixNano:      now,
				Count:             s.count,
				Sum:               &sum,
				Min:               &lo,
				Max:               &hi,
				BucketCounts:      s.buckets,
				ExplicitBounds:    v.bounds,
				Exemplars:         s.otlpExemplars(false),
			}
			h.DataPoints = append(h.DataPoints, dp)
		}
		m.Data = &metricsv1.Metric_Histogram{Histogram: h}
	}
	return m
}

func numberPoint(s *seriesSnapshot, now uint64, cumulative bool) *metricsv1.NumberDataPoint {
	dp := &metricsv1.NumberDataPoint{
		Attributes:   s.keyValues(),
		TimeUnixNano: now,
		Exemplars:    s.otlpExemplars(true),
	}
	if cumulative {
		// The client's clock may run ahead of ours; a start after the point's time is invalid.
		dp.StartTimeUnixNano = min(uint64(s.start), now)
	}
	return dp
}

func (s *seriesSnapshot) keyValues() []*commonv1.KeyValue {
	if s.overflow {
		return []*commonv1.KeyValue{boolKV(attrOverflow, true)}
	}
	out := make([]*commonv1.KeyValue, 0, len(s.attrs))
	for _, a := range s.attrs {
		out = append(out, stringKV(a.k, a.v))
	}
	return out
}

// otlpExemplars converts the stored exemplars. Attachments named trace_id/span_id (or traceId/
// spanId) that hold hex ids become the exemplar's ids; all others are filtered attributes.
func (s *seriesSnapshot) otlpExemplars(keepInt bool) []*metricsv1.Exemplar {
	var out []*metricsv1.Exemplar
	for i := range s.exemplars {
		e := &s.exemplars[i]
		if !e.set {
			continue
		}
		ex := &metricsv1.Exemplar{TimeUnixNano: uint64(e.t)}
		if keepInt && e.isInt {
			ex.Value = &metricsv1.Exemplar_AsInt{AsInt: e.i}
		} else {
			ex.Value = &metricsv1.Exemplar_AsDouble{AsDouble: e.f}
		}
		for b := e.attachments; len(b) > 0; {
			var k, v []byte
			k, b = cutString(b)
			v, b = cutString(b)
			switch string(k) {
			case "trace_id", "traceId":
				if id, ok := decodeID(v, 16); ok && ex.TraceId == nil {
					ex.TraceId = id
					continue
				}
			case "span_id", "spanId":
				if id, ok := decodeID(v, 8); ok && ex.SpanId == nil {
					ex.SpanId = id
					continue
				}
			}
			ex.FilteredAttributes = append(ex.FilteredAttributes, stringKV(toString(k), toString(v)))
		}
		out = append(out, ex)
	}
	return out
}

// cutString splits a uvarint-length-prefixed string off b (the encoding view.record writes).
func cutString(b []byte) (s, rest []byte) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		panic("BUG: corrupt exemplar attachment encoding")
	}
	return b[w : w+int(n)], b[w+int(n):]
}

// resource builds the resource of a PHP process.
func (s *Server) resource(pid uint64, rt runtimeInfo) *resourcev1.Resource {
	r := &resourcev1.Resource{}
	if s.cfg.ServiceName != "" {
		r.Attributes = append(r.Attributes, stringKV("service.name", s.cfg.ServiceName))
	}
	r.Attributes = append(r.Attributes,
		intKV("process.pid", int64(pid)),
		stringKV("process.runtime.name", "php"))
	if rt.php != "" {
		r.Attributes = append(r.Attributes, stringKV("process.runtime.version", rt.php))
	}
	if rt.zend != "" {
		r.Attributes = append(r.Attributes, stringKV("process.runtime.description", "Zend Engine v"+rt.zend))
	}
	return r
}
