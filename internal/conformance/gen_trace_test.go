package conformance

import (
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcoltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rtrace "go.opentelemetry.io/proto/otlp/trace/v1"
)

func (g *gen) traceRequest() *rcoltrace.ExportTraceServiceRequest {
	req := &rcoltrace.ExportTraceServiceRequest{}
	for range g.upTo(3) {
		rs := &rtrace.ResourceSpans{Resource: g.resource(), SchemaUrl: g.schemaURL()}
		for range g.upTo(3) {
			ss := &rtrace.ScopeSpans{Scope: g.scope(), SchemaUrl: g.schemaURL()}
			for range g.upTo(4) {
				ss.Spans = append(ss.Spans, g.span())
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	return req
}

func (g *gen) span() *rtrace.Span {
	if g.chance(0.05) {
		return &rtrace.Span{}
	}
	s := &rtrace.Span{
		TraceId:                g.id(16),
		SpanId:                 g.id(8),
		TraceState:             g.traceState(),
		ParentSpanId:           g.id(8),
		Flags:                  g.u32(),
		Name:                   g.str(16),
		Kind:                   rtrace.Span_SpanKind(g.enum(int32(rtrace.Span_SPAN_KIND_CONSUMER))),
		StartTimeUnixNano:      g.u64(),
		EndTimeUnixNano:        g.u64(),
		Attributes:             g.attrs(6, 2),
		DroppedAttributesCount: g.u32(),
		DroppedEventsCount:     g.u32(),
		DroppedLinksCount:      g.u32(),
	}
	for range g.upTo(3) {
		s.Events = append(s.Events, &rtrace.Span_Event{
			TimeUnixNano:           g.u64(),
			Name:                   g.str(10),
			Attributes:             g.attrs(3, 1),
			DroppedAttributesCount: g.u32(),
		})
	}
	for range g.upTo(2) {
		s.Links = append(s.Links, &rtrace.Span_Link{
			TraceId:                g.id(16),
			SpanId:                 g.id(8),
			TraceState:             g.traceState(),
			Attributes:             g.attrs(3, 1),
			DroppedAttributesCount: g.u32(),
			Flags:                  g.u32(),
		})
	}
	if !g.chance(0.3) {
		s.Status = &rtrace.Status{
			Message: g.str(12),
			Code:    rtrace.Status_StatusCode(g.enum(int32(rtrace.Status_STATUS_CODE_ERROR))),
		}
	}
	return s
}

func (g *gen) traceState() string {
	if g.chance(0.5) {
		return ""
	}
	return "vendor=" + g.str(8) + ",other=" + g.str(4)
}
