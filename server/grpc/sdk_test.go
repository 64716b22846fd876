package grpcserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// The official OpenTelemetry Go SDK exporters send traces, metrics and logs to otlpgate over
// OTLP/gRPC; exactly their data is found in the file destination. On either transport, with
// the traces gzip-compressed on otlpgate's own.
func TestSDKExportersToFile(t *testing.T) {
	for _, tr := range []string{grpcserver.TransportGRPCGo, grpcserver.TransportOwn} {
		t.Run(tr, func(t *testing.T) { testSDKExportersToFile(t, tr) })
	}
}

func testSDKExportersToFile(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	fcfg := filedest.DefaultConfig()
	fcfg.Path = filepath.Join(t.TempDir(), "otlp.jsonl")
	fcfg.SummaryInterval = 0
	file, err := filedest.New(fcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{file})
	if err != nil {
		t.Fatal(err)
	}
	scfg := grpcserver.DefaultConfig()
	scfg.Transport = transport
	srv, err := grpcserver.New(scfg, p, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	addr := ln.Addr().String()
	res := resource.NewSchemaless(attribute.String("service.name", "sdk-test"))

	// Traces.
	topts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure()}
	mopts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(addr), otlpmetricgrpc.WithInsecure()}
	if transport == grpcserver.TransportOwn {
		topts = append(topts, otlptracegrpc.WithCompressor("gzip"))
	}
	texp, err := otlptracegrpc.New(ctx, topts...)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp), sdktrace.WithResource(res))
	_, parent := tp.Tracer("otlpgate-test").Start(ctx, "parent-op", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.route", "/checkout"), attribute.Int64("retries", 3), attribute.Bool("cached", true)))
	_, child := tp.Tracer("otlpgate-test").Start(trace.ContextWithSpan(ctx, parent), "child-op")
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// Metrics.
	mexp, err := otlpmetricgrpc.New(ctx, mopts...)
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Hour))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	counter, _ := mp.Meter("otlpgate-test").Int64Counter("orders.placed")
	counter.Add(ctx, 5) // two adds, one series
	counter.Add(ctx, 2)
	hist, _ := mp.Meter("otlpgate-test").Float64Histogram("order.value")
	hist.Record(ctx, 12.5)
	if err := mp.Shutdown(ctx); err != nil { // collects and exports once
		t.Fatal(err)
	}

	// Logs.
	lexp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(addr), otlploggrpc.WithInsecure())
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

	srv.Shutdown(ctx)
	p.Close()
	if err := file.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	var spans []map[string]any
	var metrics []map[string]any
	var logs []map[string]any
	for _, doc := range readLines(t, fcfg.Path) {
		for _, k := range []string{"resourceSpans", "resourceMetrics", "resourceLogs"} {
			for _, r := range list(doc[k]) {
				rm := r.(map[string]any)
				if got := attr(rm["resource"].(map[string]any)["attributes"], "service.name"); got != "sdk-test" {
					t.Errorf("%s resource service.name = %v", k, got)
				}
				for _, sc := range list(rm[map[string]string{"resourceSpans": "scopeSpans", "resourceMetrics": "scopeMetrics", "resourceLogs": "scopeLogs"}[k]]) {
					scm := sc.(map[string]any)
					if name := scm["scope"].(map[string]any)["name"]; name != "otlpgate-test" {
						t.Errorf("scope name %v", name)
					}
					for _, x := range list(scm["spans"]) {
						spans = append(spans, x.(map[string]any))
					}
					for _, x := range list(scm["metrics"]) {
						metrics = append(metrics, x.(map[string]any))
					}
					for _, x := range list(scm["logRecords"]) {
						logs = append(logs, x.(map[string]any))
					}
				}
			}
		}
	}

	if len(spans) != 2 {
		t.Fatalf("%d spans in the file, want 2", len(spans))
	}
	byName := map[string]map[string]any{}
	for _, s := range spans {
		byName[s["name"].(string)] = s
	}
	ps, cs := byName["parent-op"], byName["child-op"]
	if ps == nil || cs == nil {
		t.Fatalf("span names: %v", byName)
	}
	psc := parent.SpanContext()
	if ps["traceId"] != psc.TraceID().String() || ps["spanId"] != psc.SpanID().String() {
		t.Errorf("parent ids %v/%v, want %s/%s", ps["traceId"], ps["spanId"], psc.TraceID(), psc.SpanID())
	}
	if cs["traceId"] != psc.TraceID().String() || cs["parentSpanId"] != psc.SpanID().String() || cs["spanId"] != child.SpanContext().SpanID().String() {
		t.Errorf("child ids %v/%v/%v", cs["traceId"], cs["parentSpanId"], cs["spanId"])
	}
	if ps["kind"] != json.Number("2") {
		t.Errorf("parent kind %v, want 2 (server)", ps["kind"])
	}
	if attr(ps["attributes"], "http.route") != "/checkout" || attr(ps["attributes"], "retries") != "3" || attr(ps["attributes"], "cached") != true {
		t.Errorf("parent attributes %v", ps["attributes"])
	}

	mByName := map[string]map[string]any{}
	for _, m := range metrics {
		mByName[m["name"].(string)] = m
	}
	sum := mByName["orders.placed"]["sum"].(map[string]any)
	if pts := list(sum["dataPoints"]); len(pts) != 1 || pts[0].(map[string]any)["asInt"] != "7" || sum["isMonotonic"] != true {
		t.Errorf("orders.placed = %v", sum)
	}
	h := mByName["order.value"]["histogram"].(map[string]any)
	if pts := list(h["dataPoints"]); len(pts) != 1 || pts[0].(map[string]any)["count"] != "1" || pts[0].(map[string]any)["sum"] != json.Number("12.5") {
		t.Errorf("order.value = %v", h)
	}

	if len(logs) != 1 {
		t.Fatalf("%d log records, want 1", len(logs))
	}
	l := logs[0]
	if l["body"].(map[string]any)["stringValue"] != "payment accepted" || l["severityNumber"] != json.Number("13") || attr(l["attributes"], "order.id") != "A-17" {
		t.Errorf("log record %v", l)
	}
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var doc map[string]any
		d := json.NewDecoder(bytesReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&doc); err != nil {
			t.Fatalf("bad JSON line: %v", err)
		}
		docs = append(docs, doc)
	}
	return docs
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// attr returns the value of attribute key: a string, the decimal string of an int, or a bool.
func attr(attrs any, key string) any {
	for _, a := range list(attrs) {
		kv := a.(map[string]any)
		if kv["key"] != key {
			continue
		}
		for _, v := range kv["value"].(map[string]any) {
			return v
		}
	}
	return nil
}
