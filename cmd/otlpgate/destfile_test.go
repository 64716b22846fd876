package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// idSink is an OTLP/gRPC trace server on the Collector's pdata handlers that counts the span ids
// it acknowledged; with delay it takes that long over each call.
type idSink struct {
	ptraceotlp.UnimplementedGRPCServer
	addr  string
	delay time.Duration
	mu    sync.Mutex
	ids   map[trace.SpanID]int
}

func startIDSink(t *testing.T, delay time.Duration) *idSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &idSink{addr: ln.Addr().String(), delay: delay, ids: map[trace.SpanID]int{}}
	s := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(s, u)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return u
}

func (u *idSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	time.Sleep(u.delay)
	rss := req.Traces().ResourceSpans()
	u.mu.Lock()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			sps := sss.At(j).Spans()
			for k := range sps.Len() {
				u.ids[trace.SpanID(sps.At(k).SpanID())]++
			}
		}
	}
	u.mu.Unlock()
	return ptraceotlp.NewExportResponse(), nil
}

func (u *idSink) count(id trace.SpanID) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[id]
}

// ackedSpans wraps the SDK's OTLP exporter and keeps, for every span an export acknowledged,
// the generations of destination sets that may have been in force while it was admitted: from
// the last one applied when the export began to the last one begun when it returned.
type ackedSpans struct {
	sdktrace.SpanExporter
	installed, started atomic.Int64
	mu                 sync.Mutex
	windows            map[trace.SpanID][2]int64
}

// settle waits (bounded) until n spans were acknowledged wholly within generation gen, so that
// every generation is proven by spans of its own, however slow the machine.
func (a *ackedSpans) settle(t *testing.T, gen int64, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		a.mu.Lock()
		c := 0
		for _, w := range a.windows {
			if w[0] == gen && w[1] == gen {
				c++
			}
		}
		a.mu.Unlock()
		if c >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans acknowledged in generation %d within a minute, want %d", c, gen, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *ackedSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	lo := a.installed.Load()
	if err := a.SpanExporter.ExportSpans(ctx, spans); err != nil {
		return err // not acknowledged: nothing is owed
	}
	hi := a.started.Load()
	a.mu.Lock()
	for _, sp := range spans {
		a.windows[sp.SpanContext().SpanID()] = [2]int64{lo, hi}
	}
	a.mu.Unlock()
	return nil
}

// The official OpenTelemetry Go SDK sends spans without pause through the real binary while
// its -dest.file is rewritten and SIGHUP sent: a destination added, one removed (slow, with
// batches in flight), one changed, an invalid line (which changes nothing), and the removed
// one back. Every span the SDK saw acknowledged reached every destination configured while it
// was admitted, and none that was not (exact span ids, per destination); the reloads and the
// failure are counted and the failure's reason logged; the process then stops with nothing
// lost.
func TestBinaryDestFileReloadedUnderLoad(t *testing.T) {
	bin := buildBinary(t)
	sinks := map[string]*idSink{"a": startIDSink(t, 0), "b": startIDSink(t, 5*time.Millisecond), "c": startIDSink(t, 0)}
	spec := func(name string, extra ...string) string {
		return strings.Join(append([]string{"name=" + name, "endpoint=" + sinks[name].addr, "protocol=v1", "mode=unary",
			"retry-initial=20ms", "retry-max=200ms"}, extra...), ",")
	}
	path := filepath.Join(t.TempDir(), "destinations")
	write := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("# upstreams", spec("a"), spec("b"))
	g := startGateway(t, bin, "-dest.file", path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms", "-shutdown.timeout", "10s")
	waitReady(t, g)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(g.grpcAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 20 * time.Millisecond,
			MaxInterval: 200 * time.Millisecond, MaxElapsedTime: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	acked := &ackedSpans{SpanExporter: exp, windows: map[trace.SpanID][2]int64{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.Empty()),
		sdktrace.WithBatcher(acked, sdktrace.WithBatchTimeout(10*time.Millisecond), sdktrace.WithMaxExportBatchSize(32)))
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		tr := tp.Tracer("reload")
		for range 200000 { // bounded; stopped long before
			select {
			case <-stop:
				return
			default:
			}
			_, sp := tr.Start(ctx, "op")
			sp.End()
			time.Sleep(300 * time.Microsecond)
		}
	}()

	sets := [][]string{{"a", "b"}}
	reloads, failures := 0, 0
	step := func(want []string, lines ...string) {
		t.Helper()
		acked.settle(t, int64(len(sets)-1), 100) // spans flow in the generation before
		gen := int64(len(sets))
		sets = append(sets, want)
		acked.started.Store(gen)
		write(lines...)
		metric, n := "otlpgate_config_reloads_total", &reloads
		if want == nil {
			metric, n = "otlpgate_config_reload_failures_total", &failures
			sets[gen] = sets[gen-1] // refused: the set that ran keeps running
		}
		*n++
		g.cmd.Process.Signal(syscall.SIGHUP)
		deadline := time.Now().Add(30 * time.Second)
		for scrape(t, g.admin, metric) < float64(*n) {
			if time.Now().After(deadline) {
				t.Fatalf("generation %d: %s did not reach %d:\n%s", gen, metric, *n, g.stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		acked.installed.Store(gen)
	}
	step([]string{"a", "b", "c"}, spec("a"), spec("b"), spec("c"))                                 // a destination added
	step([]string{"a", "c"}, spec("a"), spec("c"))                                                 // one removed
	step([]string{"a", "c"}, spec("a", "concurrency=2"), spec("c"))                                // one changed
	step(nil, spec("a", "concurrency=2"), spec("c"), "name=d,endpoint=127.0.0.1:1,frobnicate=1")   // invalid
	step([]string{"a", "c", "b"}, spec("a", "concurrency=2"), "# b is back", spec("c"), spec("b")) // the removed one back
	acked.settle(t, int64(len(sets)-1), 100)
	close(stop)
	<-loaded
	if err := tp.Shutdown(ctx); err != nil { // exports what the batcher holds
		t.Fatal(err)
	}

	// in reports whether name is in every (all) or some (!all) set of generations w.
	in := func(w [2]int64, name string, all bool) bool {
		for gen := w[0]; gen <= w[1]; gen++ {
			has := false
			for _, n := range sets[gen] {
				has = has || n == name
			}
			if has != all {
				return !all
			}
		}
		return all
	}
	missing := func() string {
		for id, w := range acked.windows {
			for name, s := range sinks {
				if in(w, name, true) && s.count(id) == 0 {
					return fmt.Sprintf("span %s (generations %d..%d) never reached %s", id, w[0], w[1], name)
				}
			}
		}
		return ""
	}
	deadline := time.Now().Add(time.Minute)
	for m := missing(); m != ""; m = missing() {
		if time.Now().After(deadline) {
			t.Fatal(m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	perGen := make([]int, len(sets))
	dups := 0
	for id, w := range acked.windows {
		for name, s := range sinks {
			n := s.count(id)
			if n > 0 && !in(w, name, false) {
				t.Errorf("span %s (generations %d..%d) reached %s, configured in none of them", id, w[0], w[1], name)
			}
			dups += max(n-1, 0)
		}
		if w[0] == w[1] {
			perGen[w[0]]++
		}
	}
	for gen, n := range perGen {
		if n == 0 {
			t.Errorf("no span was acknowledged wholly within generation %d: the test proves nothing there", gen)
		}
	}
	t.Logf("%d spans acknowledged, wholly within each generation %v; %d duplicate deliveries", len(acked.windows), perGen, dups)
	if got := scrape(t, g.admin, "otlpgate_config_reloads_total"); got != 4 {
		t.Errorf("otlpgate_config_reloads_total = %v, want 4", got)
	}
	if got := scrape(t, g.admin, "otlpgate_config_reload_failures_total"); got != 1 {
		t.Errorf("otlpgate_config_reload_failures_total = %v, want 1", got)
	}
	if !strings.Contains(g.stderr.String(), "cannot reload the destinations") || !strings.Contains(g.stderr.String(), "frobnicate") {
		t.Errorf("the refused reload is not logged with its reason:\n%s", g.stderr.String())
	}
	g.terminate(t)
	if g.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
}

// Two destinations in -dest.file; the second is removed and added again by SIGHUP while the
// first, on a slow upstream, has calls in flight. The first is never replaced (the reload
// lines name it in no change: its default queue-bytes, which derives from the number of
// destinations, follows in place), so nothing it had in flight is sent again: every span
// reaches each upstream exactly once, and the process stops with nothing lost.
func TestBinaryDestFileReloadKeepsUnchanged(t *testing.T) {
	bin := buildBinary(t)
	sinks := map[string]*idSink{"a": startIDSink(t, 300*time.Millisecond), "b": startIDSink(t, 0)}
	spec := func(name string) string {
		return "name=" + name + ",endpoint=" + sinks[name].addr + ",protocol=v1,mode=unary,retry-initial=20ms,retry-max=200ms"
	}
	path := filepath.Join(t.TempDir(), "destinations")
	write := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(spec("a"), spec("b"))
	// A destination a reload replaced would hand its calls in flight to its replacement after
	// this, which sends them again.
	g := startGateway(t, bin, "-dest.file", path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms",
		"-shutdown.timeout", "100ms")
	waitReady(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []trace.SpanID
	send := func(n int) {
		t.Helper()
		for range n {
			id := trace.SpanID{0xa, byte(len(ids) + 1)}
			code, body, err := post(ctx, "http://"+g.http+"/v1/traces", "application/x-protobuf",
				oneSpan(bytes.Repeat([]byte{1}, 16), id[:], len(ids)))
			if err != nil || code != 200 {
				t.Fatalf("POST: %d %s %v", code, body, err)
			}
			ids = append(ids, id)
		}
	}
	reloads := 0
	reload := func(lines ...string) {
		t.Helper()
		write(lines...)
		reloads++
		g.cmd.Process.Signal(syscall.SIGHUP)
		testkit.WaitFor(t, "the reload to be applied", func() bool {
			return scrape(t, g.admin, "otlpgate_config_reloads_total") >= float64(reloads)
		})
	}
	send(5) // in flight at a for 300ms
	reload(spec("a"))
	reload(spec("a"), spec("b"))
	send(5)
	testkit.WaitFor(t, "every span at both upstreams", func() bool {
		for _, id := range ids {
			if sinks["a"].count(id) == 0 || sinks["b"].count(id) == 0 {
				return false
			}
		}
		return true
	})
	g.terminate(t)
	if g.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	for _, id := range ids {
		for name, s := range sinks {
			if n := s.count(id); n != 1 {
				t.Errorf("span %s reached %s %d times, want once", id, name, n)
			}
		}
	}
	var lines []string
	for _, l := range strings.Split(g.stderr.String(), "\n") {
		if strings.Contains(l, "destinations reloaded") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "removed=[b] changed=[]") || !strings.Contains(lines[1], "added=[b] removed=[] changed=[]") {
		t.Errorf("the reloads changed more than b:\n%s", strings.Join(lines, "\n"))
	}
}
