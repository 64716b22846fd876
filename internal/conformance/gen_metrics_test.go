package conformance

import (
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcolmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	rmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
)

func (g *gen) metricsRequest() *rcolmetrics.ExportMetricsServiceRequest {
	req := &rcolmetrics.ExportMetricsServiceRequest{}
	for range g.upTo(3) {
		rm := &rmetrics.ResourceMetrics{Resource: g.resource(), SchemaUrl: g.schemaURL()}
		for range g.upTo(3) {
			sm := &rmetrics.ScopeMetrics{Scope: g.scope(), SchemaUrl: g.schemaURL()}
			for range g.upTo(4) {
				sm.Metrics = append(sm.Metrics, g.metric())
			}
			rm.ScopeMetrics = append(rm.ScopeMetrics, sm)
		}
		req.ResourceMetrics = append(req.ResourceMetrics, rm)
	}
	return req
}

func (g *gen) metric() *rmetrics.Metric {
	m := &rmetrics.Metric{
		Name:        g.str(12),
		Description: g.str(16),
		Unit:        g.str(3),
		Metadata:    g.attrs(2, 1),
	}
	switch g.r.IntN(6) {
	case 0:
		// no data: the oneof stays unset
	case 1:
		m.Data = &rmetrics.Metric_Gauge{Gauge: &rmetrics.Gauge{DataPoints: g.numberPoints()}}
	case 2:
		m.Data = &rmetrics.Metric_Sum{Sum: &rmetrics.Sum{
			DataPoints:             g.numberPoints(),
			AggregationTemporality: g.temporality(),
			IsMonotonic:            g.chance(0.5),
		}}
	case 3:
		h := &rmetrics.Histogram{AggregationTemporality: g.temporality()}
		for range g.upTo(3) {
			h.DataPoints = append(h.DataPoints, g.histogramPoint())
		}
		m.Data = &rmetrics.Metric_Histogram{Histogram: h}
	case 4:
		h := &rmetrics.ExponentialHistogram{AggregationTemporality: g.temporality()}
		for range g.upTo(3) {
			h.DataPoints = append(h.DataPoints, g.expHistogramPoint())
		}
		m.Data = &rmetrics.Metric_ExponentialHistogram{ExponentialHistogram: h}
	case 5:
		s := &rmetrics.Summary{}
		for range g.upTo(3) {
			s.DataPoints = append(s.DataPoints, g.summaryPoint())
		}
		m.Data = &rmetrics.Metric_Summary{Summary: s}
	}
	return m
}

func (g *gen) temporality() rmetrics.AggregationTemporality {
	return rmetrics.AggregationTemporality(g.enum(int32(rmetrics.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE)))
}

func (g *gen) numberPoints() []*rmetrics.NumberDataPoint {
	var pts []*rmetrics.NumberDataPoint
	for range g.upTo(4) {
		p := &rmetrics.NumberDataPoint{
			Attributes:        g.attrs(4, 1),
			StartTimeUnixNano: g.u64(),
			TimeUnixNano:      g.u64(),
			Exemplars:         g.exemplars(),
			Flags:             g.u32(),
		}
		switch g.r.IntN(3) {
		case 1:
			p.Value = &rmetrics.NumberDataPoint_AsDouble{AsDouble: g.f64Present()}
		case 2:
			p.Value = &rmetrics.NumberDataPoint_AsInt{AsInt: g.i64()}
		}
		pts = append(pts, p)
	}
	return pts
}

func (g *gen) histogramPoint() *rmetrics.HistogramDataPoint {
	p := &rmetrics.HistogramDataPoint{
		Attributes:        g.attrs(4, 1),
		StartTimeUnixNano: g.u64(),
		TimeUnixNano:      g.u64(),
		Count:             g.u64(),
		Sum:               g.optF64(),
		Exemplars:         g.exemplars(),
		Flags:             g.u32(),
		Min:               g.optF64(),
		Max:               g.optF64(),
	}
	bounds := g.upTo(6)
	for range bounds {
		p.ExplicitBounds = append(p.ExplicitBounds, g.f64Present())
	}
	if bounds > 0 || g.chance(0.5) {
		for range bounds + 1 {
			p.BucketCounts = append(p.BucketCounts, g.u64())
		}
	}
	return p
}

func (g *gen) expHistogramPoint() *rmetrics.ExponentialHistogramDataPoint {
	p := &rmetrics.ExponentialHistogramDataPoint{
		Attributes:        g.attrs(4, 1),
		StartTimeUnixNano: g.u64(),
		TimeUnixNano:      g.u64(),
		Count:             g.u64(),
		Sum:               g.optF64(),
		Scale:             g.i32(),
		ZeroCount:         g.u64(),
		Positive:          g.buckets(),
		Negative:          g.buckets(),
		Flags:             g.u32(),
		Exemplars:         g.exemplars(),
		Min:               g.optF64(),
		Max:               g.optF64(),
		ZeroThreshold:     g.f64(),
	}
	return p
}

// buckets covers absent, empty, and filled bucket sets, with negative offsets (zigzag).
func (g *gen) buckets() *rmetrics.ExponentialHistogramDataPoint_Buckets {
	if g.chance(0.25) {
		return nil
	}
	b := &rmetrics.ExponentialHistogramDataPoint_Buckets{Offset: g.i32()}
	for range g.upTo(6) {
		b.BucketCounts = append(b.BucketCounts, g.u64())
	}
	return b
}

func (g *gen) summaryPoint() *rmetrics.SummaryDataPoint {
	p := &rmetrics.SummaryDataPoint{
		Attributes:        g.attrs(4, 1),
		StartTimeUnixNano: g.u64(),
		TimeUnixNano:      g.u64(),
		Count:             g.u64(),
		Sum:               g.f64(),
		Flags:             g.u32(),
	}
	for range g.upTo(4) {
		p.QuantileValues = append(p.QuantileValues, &rmetrics.SummaryDataPoint_ValueAtQuantile{
			Quantile: g.f64(),
			Value:    g.f64(),
		})
	}
	return p
}

func (g *gen) exemplars() []*rmetrics.Exemplar {
	var ex []*rmetrics.Exemplar
	for range g.upTo(2) {
		e := &rmetrics.Exemplar{
			FilteredAttributes: g.attrs(2, 1),
			TimeUnixNano:       g.u64(),
			SpanId:             g.id(8),
			TraceId:            g.id(16),
		}
		switch g.r.IntN(3) {
		case 1:
			e.Value = &rmetrics.Exemplar_AsDouble{AsDouble: g.f64Present()}
		case 2:
			e.Value = &rmetrics.Exemplar_AsInt{AsInt: g.i64()}
		}
		ex = append(ex, e)
	}
	return ex
}
