package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// Traces to one upstream, metrics to a second, logs to a third (-dest signals=), sent by the
// OpenTelemetry Go SDK through the real binary, with and without the spool: each upstream
// receives exactly the items of its signal and nothing of the others.
func TestBinarySignalRoutes(t *testing.T) {
	bin := buildBinary(t)
	for _, spool := range []bool{false, true} {
		name := "memory"
		if spool {
			name = "spool"
		}
		t.Run(name, func(t *testing.T) {
			tempo, mimir, loki := startUpstream(t), startUpstream(t), startUpstream(t)
			flags := []string{"-batch.max-age", "10ms",
				"-dest", "name=tempo,endpoint=" + tempo.Addr() + ",protocol=v1,signals=traces,retry-initial=20ms",
				"-dest", "name=mimir,endpoint=" + mimir.Addr() + ",protocol=v1,signals=metrics,retry-initial=20ms",
				"-dest", "name=loki,endpoint=" + loki.Addr() + ",protocol=v1,signals=logs,retry-initial=20ms"}
			if spool {
				flags = append(flags, "-spool.dir", filepath.Join(t.TempDir(), "spool"))
			}
			g := startGateway(t, bin, flags...)
			waitReady(t, g)
			sendThreeSignals(t, g.grpcAddr)
			testkit.WaitFor(t, "each upstream to receive its signal", func() bool {
				return len(spanNames(tempo)) == 3 && len(metricNames(mimir)) == 2 && len(logBodies(loki)) == 2
			})
			if got := spanNames(tempo); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Errorf("traces upstream: spans %v", got)
			}
			if got := metricNames(mimir); !slices.Equal(got, []string{"order.value", "orders.placed"}) {
				t.Errorf("metrics upstream: metrics %v", got)
			}
			if got := logBodies(loki); !slices.Equal(got, []string{"one", "two"}) {
				t.Errorf("logs upstream: records %v", got)
			}
			if spool {
				// Each destination's cursor passed over the other signals' records: none is
				// left unfinished, so the spool holds nothing on any destination's account.
				testkit.WaitFor(t, "every spooled record finished by every destination", func() bool {
					return scrape(t, g.admin, "otlpgate_spool_oldest_unfinished_age_seconds") == 0
				})
			}
			for _, u := range []struct {
				name  string
				sink  *strictsink.Sink
				takes fastpath.Signal
			}{{"tempo", tempo, fastpath.Traces}, {"mimir", mimir, fastpath.Metrics}, {"loki", loki, fastpath.Logs}} {
				for sig := range fastpath.NumSignals {
					if sig != u.takes && u.sink.Accepted(sig)+u.sink.Refused(sig) != 0 {
						t.Errorf("%s received %s: %d requests", u.name, sig, u.sink.Accepted(sig)+u.sink.Refused(sig))
					}
				}
			}
		})
	}
}

// A request of a signal no destination takes is refused at the intake, over gRPC with
// UNIMPLEMENTED and over HTTP with 404, both naming signals=, and counted; so is one that
// arrived gzipped for a destination that sends gzip (the pass-through admission).
func TestBinarySignalUnserved(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	g := startGateway(t, bin, "-dest", "name=loki,endpoint="+up.Addr()+",protocol=v1,compression=gzip,signals=logs,retry-initial=20ms")
	httpAddr := g.http
	waitReady(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spans := tracetest.SpanStubs{{Name: "x"}, {Name: "y"}}.Snapshots()

	gexp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(g.grpcAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer gexp.Shutdown(ctx)
	err = gexp.ExportSpans(ctx, spans)
	if s, ok := status.FromError(errorsCause(err)); !ok || s.Code() != codes.Unimplemented || !strings.Contains(s.Message(), "signals=") {
		t.Errorf("gRPC: %v, want UNIMPLEMENTED naming signals=", err)
	}
	hexp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer hexp.Shutdown(ctx)
	if err := hexp.ExportSpans(ctx, spans); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "signals=") {
		t.Errorf("HTTP: %v, want 404 naming signals=", err)
	}
	zexp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer zexp.Shutdown(ctx)
	if err := zexp.ExportSpans(ctx, spans); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "signals=") {
		t.Errorf("HTTP gzip: %v, want 404 naming signals=", err)
	}
	if got := scrape(t, g.admin, "otlpgate_fastpath_refused_items_total", `signal="traces"`, `reason="unserved"`); got != 6 {
		t.Errorf("refused unserved spans = %v, want 6", got)
	}
	if n := up.Accepted(fastpath.Traces); n != 0 {
		t.Errorf("upstream received %d trace requests", n)
	}
}

// errorsCause unwraps err to the gRPC status error the exporter wraps.
func errorsCause(err error) error {
	for err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
	return err
}

// sendThreeSignals sends three spans, two metrics and two log records over OTLP/gRPC.
func sendThreeSignals(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := resource.NewSchemaless(attribute.String("service.name", "checkout"))
	texp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp), sdktrace.WithResource(res))
	for _, n := range []string{"a", "b", "c"} {
		_, s := tp.Tracer("t").Start(ctx, n)
		s.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mexp, err := otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(addr), otlpmetricgrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Hour))), sdkmetric.WithResource(res))
	c, _ := mp.Meter("t").Int64Counter("orders.placed")
	c.Add(ctx, 5)
	h, _ := mp.Meter("t").Float64Histogram("order.value")
	h.Record(ctx, 12.5)
	if err := mp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	lexp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(addr), otlploggrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(lexp)), sdklog.WithResource(res))
	for _, b := range []string{"one", "two"} {
		var rec otellog.Record
		rec.SetBody(attribute.StringValue(b))
		lp.Logger("t").Emit(ctx, rec)
	}
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func spanNames(s *strictsink.Sink) []string {
	var out []string
	for _, td := range s.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out = append(out, sp.Name())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func metricNames(s *strictsink.Sink) []string {
	var out []string
	for _, md := range s.Metrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					out = append(out, m.Name())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func logBodies(s *strictsink.Sink) []string {
	var out []string
	for _, ld := range s.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					out = append(out, lr.Body().AsString())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
