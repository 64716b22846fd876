package client

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	_ "github.com/otlpgate/otlpgate/internal/protoreg" // this test binary links the SDK's OTLP types too
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// ackedSpans wraps the SDK's OTLP exporter and keeps the ids of the spans whose export
// succeeded: the spans otlpgate acknowledged to the application.
type ackedSpans struct {
	sdktrace.SpanExporter
	mu  sync.Mutex
	ids map[string]bool
}

func (a *ackedSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := a.SpanExporter.ExportSpans(ctx, spans); err != nil {
		return err
	}
	a.mu.Lock()
	for _, s := range spans {
		a.ids[s.SpanContext().SpanID().String()] = true
	}
	a.mu.Unlock()
	return nil
}

// proxy is one otlpgate instance wired in process: the gRPC intake, the pipeline and one
// destination.
type proxy struct {
	srv  *grpcserver.Server
	p    *pipeline.Pipeline
	dest *Dest
}

func startProxy(t *testing.T, ln net.Listener, ack pipeline.AckMode, dcfg Config) *proxy {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	d, err := New(dcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	pc := pipeline.DefaultConfig()
	pc.Ack = ack
	pc.BatchMaxAge = 20 * time.Millisecond
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	sc := grpcserver.DefaultConfig()
	sc.Listen = ln.Addr().String()
	srv, err := grpcserver.New(sc, p, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	return &proxy{srv: srv, p: p, dest: d}
}

// stop shuts the instance down: the intake at once (crash) or gracefully, then the pipeline,
// then the destination, which may wait up to wait for its answers.
func (x *proxy) stop(crash bool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	if crash {
		cancel() // a cancelled context makes Shutdown close every connection at once
	}
	x.srv.Shutdown(ctx)
	cancel()
	x.p.Close()
	dctx, dcancel := context.WithTimeout(context.Background(), wait)
	defer dcancel()
	return x.dest.Shutdown(dctx)
}

// OpenTelemetry Go SDK -> otlpgate edge (OTEP streams) -> otlpgate gateway (acknowledging only
// once its own upstream did) -> a v1 sink. The gateway is killed while it holds requests of the
// edge that its sink has not answered, and comes back on the same port: every span the edge
// acknowledged to the SDK reaches the sink, some of them twice. Both hops on each gRPC
// transport.
func TestEndToEndGatewayRestart(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
		defer cancel()

		// The sink answers only while its gate is open.
		sink := newUpstream(t)
		var gateMu sync.Mutex
		gate := make(chan struct{})
		sink.onUnary = func(received) (otepv1.ResultCode, error) {
			gateMu.Lock()
			g := gate
			gateMu.Unlock()
			<-g
			return otepv1.ResultCode_Success, nil
		}
		openGate := func() {
			gateMu.Lock()
			defer gateMu.Unlock()
			select {
			case <-gate:
			default:
				close(gate)
			}
		}
		defer openGate()

		gwLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gwAddr := gwLn.Addr().String()
		gwCfg := unaryConfigOn(t, tr, sink.addr, ProtocolV1, 2)
		gwCfg.Name += "_gateway1"
		gw := startProxy(t, gwLn, pipeline.AckUpstream, gwCfg)

		edgeLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		edgeCfg := streamConfigOn(t, tr, gwAddr, 2, 16)
		edgeCfg.Name += "_edge"
		edgeCfg.RetryMax = 200 * time.Millisecond
		edge := startProxy(t, edgeLn, pipeline.AckAccept, edgeCfg)

		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(edgeLn.Addr().String()), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		acked := &ackedSpans{SpanExporter: exp, ids: map[string]bool{}}
		tp := sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(acked, sdktrace.WithBatchTimeout(10*time.Millisecond), sdktrace.WithMaxExportBatchSize(40)),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "e2e"))))
		tracer := tp.Tracer("otlpgate-e2e")
		emit := func(phase string, n int) {
			for i := range n {
				_, span := tracer.Start(ctx, phase, trace.WithAttributes(attribute.Int("i", i)))
				span.End()
			}
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatalf("%s: flush: %v", phase, err)
			}
		}

		// Phase 1: the sink holds its answers, so the gateway holds its answers to the edge.
		emit("before-restart", 300)
		sink.waitUntil("the gateway's first call", func() bool { return len(sink.got) > 0 })

		// Kill the gateway. Its own pending deliveries are lost (it never acknowledged them), and
		// the edge's requests on the broken streams wait for a gateway to come back.
		gw.stop(true, 50*time.Millisecond)
		openGate()
		gwLn2, err := net.Listen("tcp", gwAddr)
		if err != nil {
			t.Fatalf("cannot listen again on %s: %v", gwAddr, err)
		}
		gwCfg2 := gwCfg
		gwCfg2.Name = gwCfg.Name[:len(gwCfg.Name)-1] + "2"
		gw2 := startProxy(t, gwLn2, pipeline.AckUpstream, gwCfg2)

		// Phase 2, through the new gateway.
		emit("after-restart", 300)
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}

		// The edge drains everything it acknowledged into the new gateway, which acknowledges
		// only what the sink took.
		if err := edge.stop(false, waitFor); err != nil {
			t.Fatalf("edge shutdown: %v", err)
		}
		if err := gw2.stop(false, waitFor); err != nil {
			t.Fatalf("gateway shutdown: %v", err)
		}

		seen := map[string]int{}
		for _, g := range sink.received() {
			var req coltracev1.ExportTraceServiceRequest
			if err := req.UnmarshalVT(g.body); err != nil {
				t.Fatalf("sink got an undecodable request: %v", err)
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						seen[hex.EncodeToString(s.SpanId)]++
					}
				}
			}
		}
		acked.mu.Lock()
		defer acked.mu.Unlock()
		if len(acked.ids) != 600 {
			t.Errorf("the SDK had %d spans acknowledged, want 600", len(acked.ids))
		}
		missing, dups := 0, 0
		for id := range acked.ids {
			switch n := seen[id]; {
			case n == 0:
				missing++
			case n > 1:
				dups += n - 1
			}
		}
		if missing > 0 {
			t.Errorf("%d of %d acknowledged spans never reached the sink", missing, len(acked.ids))
		}
		resent := value(edge.dest.m.resent)
		if resent == 0 {
			t.Error("the edge re-sent nothing: the restart did not hit pending requests")
		}
		t.Logf("spans acknowledged %d, distinct at the sink %d, duplicates %d; edge requests re-sent %d",
			len(acked.ids), len(seen), dups, resent)
	})
}
