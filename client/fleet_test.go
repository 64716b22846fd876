package client

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// arrivals records, across the gateways of a test, where every span arrived.
type arrivals struct {
	mu     sync.Mutex
	spans  map[string]int             // span id -> times it arrived anywhere
	traces map[string]map[string]bool // trace id -> gateways holding a span of it
	phase  map[string]string          // trace id -> span name (the phase it was started in)
	per    map[string]int             // gateway -> spans
}

func newArrivals() *arrivals {
	return &arrivals{spans: map[string]int{}, traces: map[string]map[string]bool{}, phase: map[string]string{}, per: map[string]int{}}
}

// gwRecorder is a gateway's destination: it decodes each batch into the arrivals the gateways
// of a fleet share (which gateways hold a span of each trace), as it comes, rather than keeping
// the batches as testkit.Recorder does.
type gwRecorder struct {
	name string
	a    *arrivals
}

func (r *gwRecorder) Name() string { return r.name }

func (r *gwRecorder) Enqueue(b *pipeline.Batch) error {
	var req coltracev1.ExportTraceServiceRequest
	err := req.UnmarshalVT(b.Payload.Bytes())
	r.a.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				tid := hex.EncodeToString(sp.TraceId)
				r.a.spans[hex.EncodeToString(sp.SpanId)]++
				if r.a.traces[tid] == nil {
					r.a.traces[tid] = map[string]bool{}
				}
				r.a.traces[tid][r.name] = true
				r.a.phase[tid] = sp.Name
				r.a.per[r.name]++
			}
		}
	}
	r.a.mu.Unlock()
	b.Done(err == nil)
	return nil
}

// fleetGateway is an otlpgate gateway in process: gRPC intake and pipeline in front of a
// recorder, acknowledging once a batch is in its pipeline.
type fleetGateway struct {
	name string
	addr string
	srv  *grpcserver.Server
	p    *pipeline.Pipeline
	once sync.Once
}

func startFleetGateway(t *testing.T, name string, a *arrivals) *fleetGateway {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 5 * time.Millisecond
	p, err := pipeline.New(pc, []pipeline.Destination{&gwRecorder{name: name, a: a}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	g := &fleetGateway{name: name, addr: ln.Addr().String(), srv: srv, p: p}
	t.Cleanup(func() { g.stop(false) })
	return g
}

// stop ends the gateway: at once (crash: connections cut, answers lost) or gracefully. What
// its pipeline admitted reaches its recorder either way.
func (g *fleetGateway) stop(crash bool) {
	g.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		if crash {
			cancel()
		}
		g.srv.Shutdown(ctx)
		cancel()
		g.p.Close()
	})
}

// stopAll stops the gateways gracefully: their open batches reach their recorders.
func stopAll(gs ...*fleetGateway) {
	for _, g := range gs {
		g.stop(false)
	}
}

// fleetEdge is an otlpgate edge in process: gRPC intake, pipeline, and a Fleet.
type fleetEdge struct {
	addr  string
	srv   *grpcserver.Server
	p     *pipeline.Pipeline
	fleet *Fleet
}

func fleetConfig(t *testing.T, name string) Config {
	c := DefaultConfig()
	c.Name = name
	c.Protocol, c.Mode = ProtocolOTEP, ModeStream // gateways of otlpgate, as balanced fleets usually are
	c.Streams, c.Window = 2, 16
	c.RetryInitial, c.RetryMax, c.RetryMaxElapsed = 10*time.Millisecond, 200*time.Millisecond, 2*time.Minute
	c.ResolveInterval = 50 * time.Millisecond
	c.KeepaliveTime = 0
	return c
}

func startFleetEdge(t *testing.T, cfg Config) *fleetEdge {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("FLEET_DEBUG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	f, err := NewFleet(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 5 * time.Millisecond
	p, err := pipeline.New(pc, []pipeline.Destination{f})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	return &fleetEdge{addr: ln.Addr().String(), srv: srv, p: p, fleet: f}
}

// stop drains the edge: intake, pipeline, then the fleet, which waits for every answer.
func (e *fleetEdge) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	e.srv.Shutdown(ctx)
	e.p.Close()
	if err := e.fleet.Shutdown(ctx); err != nil {
		t.Errorf("fleet shutdown: %v", err)
	}
}

// sdk is an application using the OpenTelemetry Go SDK, exporting to the edge.
type sdk struct {
	tp     *sdktrace.TracerProvider
	acked  *ackedSpans
	traces map[string]string // trace id -> phase
}

func newSDK(t *testing.T, ctx context.Context, addr string) *sdk {
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	acked := &ackedSpans{SpanExporter: exp, ids: map[string]bool{}}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(acked, sdktrace.WithBatchTimeout(5*time.Millisecond), sdktrace.WithMaxExportBatchSize(64)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "fleet-test"))))
	return &sdk{tp: tp, acked: acked, traces: map[string]string{}}
}

// emit starts n traces of spans spans each (a root and its children), named phase, and flushes.
func (s *sdk) emit(t *testing.T, ctx context.Context, phase string, n, spans int) {
	tr := s.tp.Tracer("fleet")
	for range n {
		rctx, root := tr.Start(ctx, phase)
		s.traces[root.SpanContext().TraceID().String()] = phase
		for range spans - 1 {
			_, c := tr.Start(rctx, phase)
			c.End()
		}
		root.End()
	}
	if err := s.tp.ForceFlush(ctx); err != nil {
		t.Fatalf("%s: flush: %v", phase, err)
	}
}

// check asserts that every acknowledged span arrived (duplicates counted) and that every trace
// of the given phases is whole on one gateway, and returns the number of duplicates.
func (a *arrivals) check(t *testing.T, s *sdk, wantSpans int, wholePhases ...string) int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	s.acked.mu.Lock()
	defer s.acked.mu.Unlock()
	if len(s.acked.ids) != wantSpans {
		t.Errorf("the SDK had %d spans acknowledged, want %d", len(s.acked.ids), wantSpans)
	}
	missing, dups := 0, 0
	for id := range s.acked.ids {
		switch n := a.spans[id]; {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged spans never reached a gateway", missing, len(s.acked.ids))
	}
	whole := map[string]bool{}
	for _, p := range wholePhases {
		whole[p] = true
	}
	split := 0
	for tid, gws := range a.traces {
		if whole[a.phase[tid]] && len(gws) != 1 {
			split++
		}
	}
	if split > 0 {
		t.Errorf("%d traces spread over several gateways", split)
	}
	return dups
}

// gatewaysOf returns, per gateway, the traces of phase that reached it.
func (a *arrivals) gatewaysOf(phase string) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for tid, gws := range a.traces {
		if a.phase[tid] != phase {
			continue
		}
		for g := range gws {
			out[g]++
		}
	}
	return out
}

// 1,000 traces of 5 spans from the OpenTelemetry SDK, through an edge balancing over three
// gateways by trace id: every span arrives exactly once, every trace whole on one gateway.
func TestFleetTracesWholeOnOneGateway(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
		defer cancel()
		a := newArrivals()
		var addrs []string
		var gws []*fleetGateway
		for i := range 3 {
			g := startFleetGateway(t, fmt.Sprint("gw", i), a)
			gws = append(gws, g)
			addrs = append(addrs, g.addr)
		}
		cfg := fleetConfig(t, "fleet_whole_"+tr)
		cfg.Transport = tr
		cfg.Resolver, cfg.Endpoints = ResolverStatic, addrs
		e := startFleetEdge(t, cfg)
		s := newSDK(t, ctx, e.addr)
		for range 10 {
			s.emit(t, ctx, "run", 100, 5)
		}
		if err := s.tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		e.stop(t)
		stopAll(gws...)
		if dups := a.check(t, s, 5000, "run"); dups != 0 {
			t.Errorf("%d duplicates without any failure", dups)
		}
		per := a.gatewaysOf("run")
		for i := range 3 {
			if n := per[fmt.Sprint("gw", i)]; n < 200 || n > 470 {
				t.Errorf("gw%d got %d of 1000 traces, want about a third", i, n)
			}
		}
		t.Logf("traces per gateway: %v", per)
	})
}

// writeEndpoints replaces the endpoints file atomically, as a deploy tool would.
func writeEndpoints(t *testing.T, path string, addrs ...string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("# gateways\n"+strings.Join(addrs, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// With resolver=file: a gateway removed from the file mid-run and then stopped loses nothing
// the SDK saw acknowledged, and traces started afterwards are whole on the remaining gateways;
// a gateway added mid-run takes about a third of the new traces.
func TestFleetFileRemoveAndAdd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	a := newArrivals()
	g := []*fleetGateway{startFleetGateway(t, "A", a), startFleetGateway(t, "B", a), startFleetGateway(t, "C", a)}
	path := filepath.Join(t.TempDir(), "gateways")
	writeEndpoints(t, path, g[0].addr, g[1].addr, g[2].addr)
	cfg := fleetConfig(t, "fleet_file")
	cfg.Resolver, cfg.EndpointsFile = ResolverFile, path
	cfg.ResolveInterval = time.Hour // changes are applied by Reload, as on SIGHUP
	e := startFleetEdge(t, cfg)
	s := newSDK(t, ctx, e.addr)

	s.emit(t, ctx, "three", 300, 4)
	// What the edge acknowledged is in its open batches until sealed: seal them before the set
	// changes, or a trace could straddle the change (its first spans routed by the old set).
	e.p.Flush()
	writeEndpoints(t, path, g[0].addr, g[1].addr)
	if err := e.fleet.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := e.fleet.Backends(); len(got) != 2 {
		t.Fatalf("backends after removal: %v", got)
	}
	s.emit(t, ctx, "two", 300, 4)
	g[2].stop(false)
	s.emit(t, ctx, "two-after-stop", 300, 4)

	d := startFleetGateway(t, "D", a)
	e.p.Flush()
	writeEndpoints(t, path, g[0].addr, g[1].addr, d.addr)
	if err := e.fleet.Reload(); err != nil {
		t.Fatal(err)
	}
	s.emit(t, ctx, "three-again", 300, 4)
	if err := s.tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e.stop(t)
	stopAll(append(g, d)...)

	dups := a.check(t, s, 4*1200, "two", "two-after-stop", "three-again")
	for _, ph := range []string{"two", "two-after-stop"} {
		if n := a.gatewaysOf(ph)["C"]; n != 0 {
			t.Errorf("%d traces of phase %s reached the removed gateway", n, ph)
		}
	}
	per := a.gatewaysOf("three-again")
	if n := per["D"]; n < 60 || n > 140 {
		t.Errorf("the added gateway got %d of 300 new traces, want about a third", n)
	}
	t.Logf("new traces per gateway after the addition: %v; duplicates %d; re-routed (left) %d",
		per, dups, value(e.fleet.m.rerouted[rerouteLeft]))
}

// A gateway killed mid-run is ejected after eject-after; what was queued or pending on it goes
// to the others, and every acknowledged span arrives.
func TestFleetEjectsKilledGateway(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
		defer cancel()
		a := newArrivals()
		g := []*fleetGateway{startFleetGateway(t, "A", a), startFleetGateway(t, "B", a), startFleetGateway(t, "C", a)}
		cfg := fleetConfig(t, "fleet_eject_"+tr)
		cfg.Transport = tr
		cfg.Resolver, cfg.Endpoints = ResolverStatic, []string{g[0].addr, g[1].addr, g[2].addr}
		cfg.EjectAfter = 300 * time.Millisecond
		e := startFleetEdge(t, cfg)
		ej0, rr0 := value(e.fleet.m.ejections), value(e.fleet.m.rerouted[rerouteEjected])
		s := newSDK(t, ctx, e.addr)

		s.emit(t, ctx, "before", 200, 4)
		g[2].stop(true)
		s.emit(t, ctx, "during", 200, 4)
		deadline := time.Now().Add(waitFor)
		for len(e.fleet.Backends()) != 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := e.fleet.Backends(); len(got) != 2 {
			t.Fatalf("backends after the kill: %v, want 2", got)
		}
		s.emit(t, ctx, "after", 200, 4)
		if err := s.tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		e.stop(t)
		stopAll(g...)
		dups := a.check(t, s, 4*600, "after")
		if n := a.gatewaysOf("after")["C"]; n != 0 {
			t.Errorf("%d traces started after the ejection reached the dead gateway", n)
		}
		if v := value(e.fleet.m.ejections) - ej0; v != 1 {
			t.Errorf("%d ejections, want 1", v)
		}
		if v := value(e.fleet.m.rerouted[rerouteEjected]) - rr0; v == 0 {
			t.Error("nothing re-routed from the dead gateway")
		}
		t.Logf("re-routed (ejected) items %d, possible duplicates %d, duplicates seen %d",
			value(e.fleet.m.rerouted[rerouteEjected]), value(e.fleet.m.duplicates), dups)
	})
}

// A fleet whose file names no backend holds what it is given, and delivers it all once a
// backend appears.
func TestFleetHoldsWithoutBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	a := newArrivals()
	path := filepath.Join(t.TempDir(), "gateways")
	writeEndpoints(t, path)
	cfg := fleetConfig(t, "fleet_hold")
	cfg.Resolver, cfg.EndpointsFile = ResolverFile, path
	cfg.ResolveInterval = time.Hour
	e := startFleetEdge(t, cfg)
	if got := e.fleet.Backends(); len(got) != 0 {
		t.Fatalf("backends %v, want none", got)
	}
	s := newSDK(t, ctx, e.addr)
	s.emit(t, ctx, "held", 100, 3)
	e.p.Flush()
	for deadline := time.Now().Add(waitFor); value(e.fleet.m.held) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if value(e.fleet.m.held) == 0 {
		t.Fatal("nothing held")
	}
	g := startFleetGateway(t, "late", a)
	writeEndpoints(t, path, g.addr)
	if err := e.fleet.Reload(); err != nil {
		t.Fatal(err)
	}
	s.emit(t, ctx, "after", 100, 3)
	if err := s.tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e.stop(t)
	stopAll(g)
	if dups := a.check(t, s, 600, "held", "after"); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	if v := value(e.fleet.m.held); v != 0 {
		t.Errorf("%d bytes still held", v)
	}
}
