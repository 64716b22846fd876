package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otlpgate/otlpgate/fastpath/process"
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"github.com/otlpgate/otlpgate/internal/strictsink"
)

func TestProcessFlags(t *testing.T) {
	t.Setenv("OTLPGATE_TEST_NODE", "node-7")
	f := func(args []string, wantErr string) *config {
		t.Helper()
		cfg, err := parseConfig(args)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%v: %v", args, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%v: error %v, want one containing %q", args, err, wantErr)
		}
		return &cfg
	}
	if cfg := f(nil, ""); cfg.pipeline.Processor != nil {
		t.Error("a processor without any step")
	}
	cfg := f([]string{"-resource.set", "k8s.node.name=${env:OTLPGATE_TEST_NODE}", "-resource.set", "deployment.environment=prod",
		"-resource.delete", "secret", "-drop", "resource:k8s.namespace.name=dev", "-drop", "resource:service.name=test-*",
		"-sample.traces", "12.5", "-sample.hash-seed", "22"}, "")
	if cfg.pipeline.Processor == nil {
		t.Fatal("no processor")
	}
	p := cfg.proc
	if len(p.Set) != 2 || p.Set[0].Value != "node-7" || p.Set[1].Value != "prod" || len(p.Delete) != 1 || len(p.Drop) != 2 ||
		!p.Drop[1].Prefix || !p.Sample.On || p.Sample.Percent != 12.5 || p.Sample.HashSeed != 22 {
		t.Errorf("%+v", p)
	}
	f([]string{"-sample.traces", "0"}, "")
	// Each malformed value stops the start with an error that names it.
	f([]string{"-resource.set", "k8s.node.name=${env:OTLPGATE_TEST_UNSET}"}, "environment variable OTLPGATE_TEST_UNSET is not set")
	f([]string{"-resource.set", "novalue"}, "-resource.set \"novalue\": want key=value")
	f([]string{"-resource.set", "a=1", "-resource.set", "a=2"}, "given twice")
	f([]string{"-resource.set", "a=1", "-resource.delete", "a"}, "also given to -resource.set")
	f([]string{"-resource.delete", ""}, "empty attribute key")
	f([]string{"-drop", "k8s.namespace.name=dev"}, "want resource:KEY=VALUE")
	f([]string{"-drop", "resource:a=b", "-resource.delete", "a"}, "all or nothing")
	f([]string{"-sample.traces", "150"}, "-sample.traces \"150\": want a percentage from 0 to 100")
	f([]string{"-sample.traces", "half"}, "want a percentage")
	f([]string{"-sample.traces", "10", "-sample.hash-seed", "-1"}, "unsigned 32-bit")
	f([]string{"-sample.hash-seed", "5"}, "need -sample.traces")
	cfg = f([]string{"-sample.traces", "10", "-sample.mode", "proportional", "-sample.precision", "6", "-sample.logs"}, "")
	if s := cfg.proc.Sample; !s.On || s.Mode != process.SampleProportional || s.Precision != 6 || !s.Logs || s.Percent != 10 {
		t.Errorf("%+v", s)
	}
	if s := f([]string{"-sample.traces", "10", "-sample.mode", "equalizing"}, "").proc.Sample; s.Mode != process.SampleEqualizing || s.Precision != 0 {
		t.Errorf("%+v", s)
	}
	f([]string{"-sample.traces", "10", "-sample.mode", "consistent"}, "-sample.mode \"consistent\": want hash_seed, proportional or equalizing")
	f([]string{"-sample.traces", "10", "-sample.mode", "proportional", "-sample.precision", "0"}, "-sample.precision \"0\": want 1 to 14 hex digits")
	f([]string{"-sample.traces", "10", "-sample.mode", "proportional", "-sample.precision", "15"}, "want 1 to 14 hex digits")
	f([]string{"-sample.traces", "10", "-sample.mode", "proportional", "-sample.precision", ""}, "want 1 to 14 hex digits")
	f([]string{"-sample.traces", "10", "-sample.precision", "4"}, "-sample.precision applies to -sample.mode=proportional and equalizing")
	f([]string{"-sample.traces", "10", "-sample.mode", "equalizing", "-sample.hash-seed", "1"}, "-sample.hash-seed applies to -sample.mode=hash_seed")
	f([]string{"-sample.logs"}, "need -sample.traces")
	if p := f([]string{"-resource.from-peer", "k8s.pod.ip"}, "").proc; p.FromPeer != "k8s.pod.ip" || p.FromPeerAction != process.PeerInsert {
		t.Errorf("%+v", p)
	}
	if p := f([]string{"-resource.from-peer", "k8s.pod.ip", "-resource.from-peer.action", "upsert"}, "").proc; p.FromPeerAction != process.PeerUpsert {
		t.Errorf("%+v", p)
	}
	f([]string{"-resource.from-peer", "k8s.pod.ip", "-resource.from-peer.action", "update"}, "-resource.from-peer.action \"update\": want insert or upsert")
	f([]string{"-resource.from-peer", "a", "-resource.set", "a=1"}, "also given to -resource.set")
	f([]string{"-sample.mode", "proportional", "-sample.precision", "4"}, "need -sample.traces")
	f([]string{"-sample.traces", "1e-20"}, "below the smallest sampling probability")
}

// startUpstream is an OTLP/gRPC upstream that decodes with the Collector's own pdata: what it
// keeps is what the Collector's decoder read.
func startUpstream(t *testing.T) *strictsink.Sink {
	t.Helper()
	u, err := strictsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Close)
	return u
}

// spans returns every span the upstream received with its resource's attributes.
func spans(u *strictsink.Sink) (n int, byTrace map[pcommon.TraceID]int, resources []map[string]any) {
	byTrace = map[pcommon.TraceID]int{}
	for _, td := range u.Traces() {
		for i := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(i)
			resources = append(resources, rs.Resource().Attributes().AsRaw())
			for j := range rs.ScopeSpans().Len() {
				sps := rs.ScopeSpans().At(j).Spans()
				for k := range sps.Len() {
					byTrace[sps.At(k).TraceID()]++
					n++
				}
			}
		}
	}
	return n, byTrace, resources
}

// hashSeedKeeps is the Collector's hash_seed decision, written plainly.
func hashSeedKeeps(pct float32, seed uint32, tid [16]byte) bool {
	h := fnv.New32a()
	var s [4]byte
	binary.LittleEndian.PutUint32(s[:], seed)
	h.Write(s[:])
	h.Write(tid[:])
	return h.Sum32()&0x3fff < uint32(pct*(16384/100.0))
}

// The real binary with every processing step, fed by the official OpenTelemetry Go SDK over
// gRPC and HTTP and by a hand-made request over HTTP: the upstream's pdata reads the resource
// attributes set, deleted and kept exactly, no dropped resource, the other resources of a
// request that lost one, and sampled traces complete or absent, exactly those the Collector's
// algorithm keeps; what was left out is counted.
func TestBinaryProcessingSteps(t *testing.T) {
	t.Setenv("OTLPGATE_TEST_NODE", "node-from-env")
	bin := buildBinary(t)
	up := startUpstream(t)
	const pct, seed = 50, 7
	g := startGateway(t, bin, "-batch.max-age", "10ms",
		"-dest", "name=up,endpoint="+up.Addr()+",protocol=v1,mode=unary,retry-initial=20ms",
		"-resource.set", "k8s.node.name=${env:OTLPGATE_TEST_NODE}", "-resource.set", "deployment.environment=prod",
		"-resource.delete", "secret.token", "-drop", "resource:k8s.namespace.name=dev", "-drop", "resource:service.name=loadgen-*",
		"-sample.traces", "50", "-sample.hash-seed", "7")
	httpAddr := g.http
	waitReady(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Traces from two SDK services: checkout (kept, with a secret to delete) and one in the
	// dev namespace (dropped). Each trace has a parent and two children.
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(g.grpcAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	checkout := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(
		attribute.String("service.name", "checkout"), attribute.String("secret.token", "hunter2"),
		attribute.String("k8s.node.name", "stale"), attribute.String("k8s.namespace.name", "prod"))))
	dexp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(g.grpcAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	dev := sdktrace.NewTracerProvider(sdktrace.WithSyncer(dexp), sdktrace.WithResource(resource.NewSchemaless(
		attribute.String("service.name", "checkout"), attribute.String("k8s.namespace.name", "dev"))))
	const traces = 60
	var tids [][16]byte
	for i := range traces {
		tp := checkout
		if i%4 == 3 {
			tp = dev
		}
		pctx, parent := tp.Tracer("t").Start(ctx, "parent")
		for range 2 {
			_, child := tp.Tracer("t").Start(pctx, "child", trace.WithAttributes(attribute.Int("i", i)))
			child.End()
		}
		parent.End()
		if tp == checkout {
			tids = append(tids, parent.SpanContext().TraceID())
		}
	}
	if err := checkout.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantTraces := map[pcommon.TraceID]bool{}
	for _, tid := range tids {
		if hashSeedKeeps(pct, seed, tid) {
			wantTraces[pcommon.TraceID(tid)] = true
		}
	}
	if len(wantTraces) == 0 || len(wantTraces) == len(tids) {
		t.Fatalf("%d of %d traces kept: the test says nothing", len(wantTraces), len(tids))
	}

	// One hand-made request over HTTP with three resources: one dropped by prefix, two kept,
	// every span in a trace the sampler keeps (sampling.priority 1 forces it).
	td := ptrace.NewTraces()
	for _, svc := range []string{"loadgen-3", "cart", "payments"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(svc)
		sp.SetTraceID(pcommon.TraceID{0xaa, byte(len(svc))})
		sp.SetSpanID(pcommon.SpanID{1})
		sp.Attributes().PutInt("sampling.priority", 1)
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP: %d", resp.StatusCode)
	}
	// A request all of whose resources are dropped is answered 200 as well.
	td2 := ptrace.NewTraces()
	td2.ResourceSpans().AppendEmpty().Resource().Attributes().PutStr("service.name", "loadgen-9")
	td2.ResourceSpans().At(0).ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("x")
	body2, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td2)
	resp, err = http.Post("http://"+httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body2))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP, all dropped: %d", resp.StatusCode)
	}

	// Logs from the SDK over OTLP/HTTP carry the edits too.
	lexp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(httpAddr), otlploghttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(lexp)),
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"), attribute.String("secret.token", "x"))))
	var rec otellog.Record
	rec.SetBody(attribute.StringValue("hello"))
	lp.Logger("t").Emit(ctx, rec)
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	want := 3*len(wantTraces) + 2
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _, _ := spans(up)
		nlogs := len(up.Logs())
		if n >= want && nlogs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream has %d spans and %d log requests, want %d spans and 1:\n%s", n, nlogs, want, g.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	n, byTrace, resources := spans(up)
	if n != want {
		t.Errorf("upstream has %d spans, want %d", n, want)
	}
	for tid, c := range byTrace {
		switch {
		case tid[0] == 0xaa && tid[1] < 0x10 && tid[2] == 0 && tid[15] == 0:
			// A hand-made trace id ({0xaa, len(service)} and zeros); the SDK's random ids
			// start with 0xaa one time in 256 and are told apart by the rest.
			if c != 1 {
				t.Errorf("hand-made trace %x: %d spans", tid, c)
			}
		case !wantTraces[tid]:
			t.Errorf("trace %x arrived; the Collector's algorithm drops it", tid)
		case c != 3:
			t.Errorf("trace %x: %d of its 3 spans", tid, c)
		}
	}
	for tid := range wantTraces {
		if byTrace[tid] == 0 {
			t.Errorf("trace %x missing", tid)
		}
	}
	services := map[string]int{}
	for _, r := range resources {
		svc, _ := r["service.name"].(string)
		services[svc]++
		want := map[string]any{"service.name": svc, "k8s.node.name": "node-from-env", "deployment.environment": "prod"}
		if svc == "checkout" {
			want["k8s.namespace.name"] = "prod"
		}
		if !maps.Equal(r, want) {
			t.Errorf("resource %v, want %v", r, want)
		}
	}
	if services["cart"] != 1 || services["payments"] != 1 || services["loadgen-3"] != 0 || services["loadgen-9"] != 0 {
		t.Errorf("resources by service: %v", services)
	}
	logs := up.Logs()
	la := logs[0].ResourceLogs().At(0).Resource().Attributes().AsRaw()
	lbody := logs[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().Str()
	if want := map[string]any{"service.name": "checkout", "k8s.node.name": "node-from-env", "deployment.environment": "prod"}; !maps.Equal(la, want) || lbody != "hello" {
		t.Errorf("log resource %v body %q, want %v", la, lbody, want)
	}

	// Counted, not lost: the dev service's 15 traces and the two loadgen spans were dropped,
	// the sampler left out the checkout traces it does not keep.
	if got := scrape(t, g.admin, "otlpgate_process_dropped_items_total", `signal="traces"`); got != 15*3+2 {
		t.Errorf("otlpgate_process_dropped_items_total{signal=\"traces\"} = %v, want %d", got, 15*3+2)
	}
	if got := scrape(t, g.admin, "otlpgate_process_sampled_out_spans_total"); got != float64(3*(len(tids)-len(wantTraces))) {
		t.Errorf("otlpgate_process_sampled_out_spans_total = %v, want %d", got, 3*(len(tids)-len(wantTraces)))
	}
}

// parseConfig runs args through the flag set and finishConfig, as main does.
func parseConfig(args []string) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerFlags(fs, &cfg)
	args, err := expandArgs(args, os.LookupEnv)
	if err == nil {
		err = fs.Parse(args)
	}
	if err == nil {
		err = finishConfig(&cfg)
	}
	return cfg, err
}
