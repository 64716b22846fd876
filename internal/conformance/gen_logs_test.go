package conformance

import (
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcollogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	rlogs "go.opentelemetry.io/proto/otlp/logs/v1"
)

func (g *gen) logsRequest() *rcollogs.ExportLogsServiceRequest {
	req := &rcollogs.ExportLogsServiceRequest{}
	for range g.upTo(3) {
		rl := &rlogs.ResourceLogs{Resource: g.resource(), SchemaUrl: g.schemaURL()}
		for range g.upTo(3) {
			sl := &rlogs.ScopeLogs{Scope: g.scope(), SchemaUrl: g.schemaURL()}
			for range g.upTo(4) {
				sl.LogRecords = append(sl.LogRecords, g.logRecord())
			}
			rl.ScopeLogs = append(rl.ScopeLogs, sl)
		}
		req.ResourceLogs = append(req.ResourceLogs, rl)
	}
	return req
}

func (g *gen) logRecord() *rlogs.LogRecord {
	if g.chance(0.05) {
		return &rlogs.LogRecord{}
	}
	lr := &rlogs.LogRecord{
		TimeUnixNano:           g.u64(),
		ObservedTimeUnixNano:   g.u64(),
		SeverityNumber:         rlogs.SeverityNumber(g.enum(int32(rlogs.SeverityNumber_SEVERITY_NUMBER_FATAL4))),
		SeverityText:           g.str(5),
		Attributes:             g.attrs(5, 2),
		DroppedAttributesCount: g.u32(),
		Flags:                  g.u32(),
		TraceId:                g.id(16),
		SpanId:                 g.id(8),
		EventName:              g.str(10),
	}
	if !g.chance(0.15) {
		lr.Body = g.anyValue(3)
	}
	return lr
}
