package httpserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"github.com/otlpgate/otlpgate/internal/testkit"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// payloadOf is what r received of sig: the bodies back to back, and their items.
func payloadOf(r *testkit.Recorder, sig fastpath.Signal) ([]byte, int) {
	var body []byte
	items := 0
	for _, g := range r.Received() {
		if g.Signal == sig {
			body = append(body, g.Body...)
			items += g.Items
		}
	}
	return body, items
}

// The OpenTelemetry Go SDK's OTLP/HTTP exporters, with and without gzip, send traces, metrics
// and logs to the intake; exactly their spans, points and records reach the destination.
func TestSDKExporters(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) { sdkRun(t, gz) })
	}
}

func sdkRun(t *testing.T, gz bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sr := &testkit.Recorder{}
	p, err := pipeline.New(testPipelineConfig(), []pipeline.Destination{sr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	e.srv.adm.Init(p, nil, e.srv.cfg.OverloadAfter) // the server of start, in front of this pipeline
	addr := strings.TrimPrefix(e.url, "http://")
	res := resource.NewSchemaless(attribute.String("service.name", "sdk-http-test"))

	tc := otlptracehttp.NoCompression
	mc := otlpmetrichttp.NoCompression
	lc := otlploghttp.NoCompression
	if gz {
		tc, mc, lc = otlptracehttp.GzipCompression, otlpmetrichttp.GzipCompression, otlploghttp.GzipCompression
	}
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(), otlptracehttp.WithCompression(tc))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp), sdktrace.WithResource(res))
	_, parent := tp.Tracer("otlpgate-test").Start(ctx, "parent-op", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.route", "/checkout"), attribute.Int64("retries", 3)))
	_, child := tp.Tracer("otlpgate-test").Start(trace.ContextWithSpan(ctx, parent), "child-op")
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(addr), otlpmetrichttp.WithInsecure(), otlpmetrichttp.WithCompression(mc))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Hour))), sdkmetric.WithResource(res))
	counter, _ := mp.Meter("otlpgate-test").Int64Counter("orders.placed")
	counter.Add(ctx, 5)
	counter.Add(ctx, 2)
	hist, _ := mp.Meter("otlpgate-test").Float64Histogram("order.value")
	hist.Record(ctx, 12.5)
	if err := mp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	lexp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(addr), otlploghttp.WithInsecure(), otlploghttp.WithCompression(lc))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(lexp)), sdklog.WithResource(res))
	var rec otellog.Record
	rec.SetBody(attribute.StringValue("payment accepted"))
	rec.SetSeverity(otellog.SeverityWarn)
	rec.AddAttributes(attribute.String("order.id", "A-17"))
	lp.Logger("otlpgate-test").Emit(ctx, rec)
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	p.Flush()

	tb, titems := payloadOf(sr, fastpath.Traces)
	treq := &coltracev1.ExportTraceServiceRequest{}
	if err := treq.UnmarshalVT(tb); err != nil || titems != 2 {
		t.Fatalf("traces: %d items, %v", titems, err)
	}
	spans := map[string]bool{}
	for _, rs := range treq.ResourceSpans {
		if v := rs.Resource.Attributes[0]; v.Key != "service.name" || v.Value.GetStringValue() != "sdk-http-test" {
			t.Errorf("resource %v", rs.Resource)
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans[s.Name] = true
				psc := parent.SpanContext()
				switch s.Name {
				case "parent-op":
					tid, sid := psc.TraceID(), psc.SpanID()
					if string(s.TraceId) != string(tid[:]) || string(s.SpanId) != string(sid[:]) || s.Kind != 2 || len(s.Attributes) != 2 {
						t.Errorf("parent span %v", s)
					}
				case "child-op":
					sid := psc.SpanID()
					csid := child.SpanContext().SpanID()
					if string(s.ParentSpanId) != string(sid[:]) || string(s.SpanId) != string(csid[:]) {
						t.Errorf("child span %v", s)
					}
				}
			}
		}
	}
	if len(spans) != 2 || !spans["parent-op"] || !spans["child-op"] {
		t.Errorf("spans %v", spans)
	}

	mb, mitems := payloadOf(sr, fastpath.Metrics)
	mreq := &colmetricsv1.ExportMetricsServiceRequest{}
	if err := mreq.UnmarshalVT(mb); err != nil || mitems != 2 {
		t.Fatalf("metrics: %d items, %v", mitems, err)
	}
	for _, m := range mreq.ResourceMetrics[0].ScopeMetrics[0].Metrics {
		switch m.Name {
		case "orders.placed":
			if pts := m.GetSum().GetDataPoints(); len(pts) != 1 || pts[0].GetAsInt() != 7 {
				t.Errorf("orders.placed %v", m)
			}
		case "order.value":
			if pts := m.GetHistogram().GetDataPoints(); len(pts) != 1 || pts[0].Count != 1 || pts[0].GetSum() != 12.5 {
				t.Errorf("order.value %v", m)
			}
		default:
			t.Errorf("unexpected metric %s", m.Name)
		}
	}

	lb, litems := payloadOf(sr, fastpath.Logs)
	lreq := &collogsv1.ExportLogsServiceRequest{}
	if err := lreq.UnmarshalVT(lb); err != nil || litems != 1 {
		t.Fatalf("logs: %d items, %v", litems, err)
	}
	l := lreq.ResourceLogs[0].ScopeLogs[0].LogRecords[0]
	if l.Body.GetStringValue() != "payment accepted" || l.SeverityNumber != 13 || l.Attributes[0].Key != "order.id" || l.Attributes[0].Value.GetStringValue() != "A-17" {
		t.Errorf("log record %v", l)
	}
}
