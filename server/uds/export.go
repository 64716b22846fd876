package uds

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
)

var (
	metricExports = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_metric_exports_total",
		Help: "Metric export rounds that handed data points to the data path.",
	})
	exportsDeferred = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_deferred_exports_total",
		Help: "Final exports of ended PHP processes refused by the data path and kept to be tried again (their points are counted once, when admitted or given up).",
	})
)

const (
	// exportChunkBytes bounds one hand-over of the exporter: processes are exported in chunks
	// of about this size, so that a refusal costs only the processes of that chunk.
	exportChunkBytes = 256 << 10
	// exportRetry is how soon a refused final export is tried again while running; at
	// shutdown it is tried every finalRetry until Shutdown's context ends.
	exportRetry = time.Second
	finalRetry  = 20 * time.Millisecond
)

// scope names the instrumentation library that produced what the intake emits. Shared and
// read-only.
var scope = &commonv1.InstrumentationScope{Name: "opencensus-php"}

// runExporter exports each process's views every reporting period, and processes that ended at
// once. It runs on its own goroutine until stop is closed, then exports everything one last
// time, trying again what the data path refuses for want of room until exportAbort is closed.
func (s *Server) runExporter() {
	defer close(s.exportDone)
	for {
		now := s.clock.Now()
		due, next := s.reg.due(now, false)
		if kept := s.exportMetrics(due, now, false); len(kept) > 0 {
			s.giveUp(s.reg.keep(kept), now)
			if retry := now.Add(exportRetry); next.IsZero() || retry.Before(next) {
				next = retry
			}
		}
		// Processes whose final export was admitted are gone: give their series back.
		s.reg.recountSeries(s.limits.budget)
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
			s.finalExport()
			return
		}
		cancel()
	}
}

// finalExport exports every process one last time. What the data path refuses for want of room
// is tried again until it is admitted or exportAbort is closed; then it is counted as dropped.
func (s *Server) finalExport() {
	due, _ := s.reg.due(s.clock.Now(), true)
	t := time.NewTimer(finalRetry)
	defer t.Stop()
	for {
		due = s.exportMetrics(due, s.clock.Now(), true)
		if len(due) == 0 {
			return
		}
		t.Reset(finalRetry)
		select {
		case <-t.C:
		case <-s.exportAbort:
			s.giveUp(due, s.clock.Now())
			return
		}
	}
}

// giveUp counts the points of procs as dropped for want of room.
func (s *Server) giveUp(procs []*process, now time.Time) {
	for _, p := range procs {
		if _, n, _ := s.resourceMetrics(p, now); n > 0 {
			s.countConsume(fastpath.Metrics, pipeline.ErrFull, n)
		}
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
// process, in chunks of about exportChunkBytes. It returns the processes whose export was
// refused for want of room and must be tried again: ended ones, or with final set all of them
// (their data exists nowhere else). A live process refused while running needs no retry: its
// aggregates are cumulative and its next period reports them; views it retired are kept for
// that report.
func (s *Server) exportMetrics(procs []*process, now time.Time, final bool) (retry []*process) {
	if len(procs) == 0 {
		return nil
	}
	req := colmetricsv1.ExportMetricsServiceRequestFromVTPool()
	defer req.ReturnToVTPool()
	buf := getBody(0)
	defer putBody(buf)
	var c exportChunk
	flush := func() {
		if len(c.procs) > 0 {
			retry = s.consumeChunk(&c, *buf, final, retry)
		}
		c.reset()
		*buf = (*buf)[:0]
	}
	exported := false
	for _, p := range procs {
		rm, n, retired := s.resourceMetrics(p, now)
		if n == 0 {
			continue
		}
		req.ResourceMetrics = append(req.ResourceMetrics[:0], rm)
		size := req.SizeVT()
		if len(*buf) > 0 && len(*buf)+size > s.chunkBytes {
			flush()
		}
		start := len(*buf)
		*buf = slices.Grow(*buf, size)[:start+size]
		if _, err := req.MarshalToSizedBufferVT((*buf)[start:]); err != nil {
			panic("BUG: marshal of a built metrics request: " + err.Error())
		}
		c.procs = append(c.procs, p)
		c.ends = append(c.ends, len(*buf))
		c.points = append(c.points, n)
		c.retired = append(c.retired, retired)
		exported = true
	}
	flush()
	if exported {
		metricExports.Inc()
	}
	return retry
}

// exportChunk is the processes marshalled into one buffer, in order: ends[i] is where the i-th
// resource's encoding ends.
type exportChunk struct {
	procs   []*process
	ends    []int
	points  []int
	retired [][]*view
}

func (c *exportChunk) reset() {
	c.procs, c.ends, c.points, c.retired = c.procs[:0], c.ends[:0], c.points[:0], c.retired[:0]
}

// consumeChunk hands one chunk to the consumer and appends to retry the processes to try
// again. A chunk too large for the data path is split into its processes.
func (s *Server) consumeChunk(c *exportChunk, body []byte, final bool, retry []*process) []*process {
	total := 0
	for _, n := range c.points {
		total += n
	}
	err := s.next.Consume(pipeline.Request{Signal: fastpath.Metrics, Body: body, Items: total})
	if err == nil || len(c.procs) == 1 || !errors.Is(err, pipeline.ErrTooLarge) {
		return s.settle(c, 0, len(c.procs), err, final, retry)
	}
	from := 0
	for i, end := range c.ends {
		retry = s.settle(c, i, i+1, s.next.Consume(pipeline.Request{Signal: fastpath.Metrics, Body: body[from:end], Items: c.points[i]}), final, retry)
		from = end
	}
	return retry
}

// settle records the outcome err of the hand-over of the processes c.procs[from:to].
func (s *Server) settle(c *exportChunk, from, to int, err error, final bool, retry []*process) []*process {
	points := 0
	for _, n := range c.points[from:to] {
		points += n
	}
	if err == nil || !errors.Is(err, pipeline.ErrFull) {
		s.countConsume(fastpath.Metrics, err, points)
		return retry
	}
	for i := from; i < to; i++ {
		p := c.procs[i]
		p.restoreRetired(c.retired[i])
		if final || p.ended.Load() {
			exportsDeferred.Inc()
			retry = append(retry, p)
			continue
		}
		s.countConsume(fastpath.Metrics, err, c.points[i])
	}
	return retry
}

// resourceMetrics builds the metrics of p, the number of data points in them and the retired
// views it took from p (for restoreRetired when the export is refused).
func (s *Server) resourceMetrics(p *process, now time.Time) (*metricsv1.ResourceMetrics, int, []*view) {
	p.mu.Lock()
	views := make([]*view, 0, len(p.mu.views)+len(p.mu.retired))
	for _, v := range p.mu.views {
		views = append(views, v)
	}
	retired := p.mu.retired
	views = append(views, retired...)
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
		return nil, 0, retired
	}
	return &metricsv1.ResourceMetrics{
		Resource:     s.resource(p.pid, rt),
		ScopeMetrics: []*metricsv1.ScopeMetrics{sm},
	}, points, retired
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
