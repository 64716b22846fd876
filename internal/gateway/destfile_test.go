package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	"github.com/otlpgate/otlpgate/spool"
)

func TestParseDestFile(t *testing.T) {
	t.Setenv("OTLPGATE_TEST_KEY", "k3y")
	got, err := parseDestFile([]byte("# upstreams\n\nname=a,endpoint=x:1\n  # off: name=b,endpoint=y:1\r\n\tname=c,endpoint=z:1,header=k:v#1  \n" +
		"name=d,endpoint=w:1,header=x-api-key:${env:OTLPGATE_TEST_KEY},header=x-lit:$${env:X}\n"))
	want := []string{"name=a,endpoint=x:1", "name=c,endpoint=z:1,header=k:v#1", "name=d,endpoint=w:1,header=x-api-key:k3y,header=x-lit:${env:X}"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("parseDestFile = %q, %v, want %q", got, err, want)
	}
	if _, err := parseDestFile([]byte("name=a,endpoint=x:1\n\nname=b,header=k:${env:OTLPGATE_TEST_UNSET}\n")); err == nil ||
		err.Error() != "line 3: environment variable OTLPGATE_TEST_UNSET is not set (${env:OTLPGATE_TEST_UNSET})" {
		t.Errorf("an unset variable: %v", err)
	}
	// A quoted value holds commas; one left open is refused with its line.
	got, err = parseDestFile([]byte("name=a,endpoint=x:1,header=\"authorization:Basic a,b\"\n"))
	if err != nil || len(got) != 1 {
		t.Errorf("a quoted value: %q, %v", got, err)
	}
	if _, err := parseDestFile([]byte("name=a,endpoint=x:1\n# b\nname=c,header=\"k:a,b\n")); err == nil ||
		err.Error() != `line 3: a value opened with " has no closing quote` {
		t.Errorf("an unterminated quote: %v", err)
	}
}

// writeFile replaces path's content the way an operator's tool should: a new file renamed over
// the old one, so that no reader sees half of it.
func writeFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// destSpec is a -dest value for a v1 unary destination to addr with test-sized timers.
func destSpec(name, addr string, extra ...string) string {
	return strings.Join(append([]string{"name=" + name, "endpoint=" + addr, "protocol=v1", "mode=unary",
		"retry-initial=10ms", "retry-max=100ms"}, extra...), ",")
}

// sender exports one-span requests with ids from 1 over gRPC, one at a time, until stopped,
// and keeps each acknowledged id's window: the generations of destination sets that may have
// been in force while it was admitted.
type sender struct {
	installed, started atomic.Int64 // generations: applied, and being applied
	mu                 sync.Mutex
	windows            map[uint64][2]int64
	stop               chan struct{}
	done               chan struct{}
}

func startSender(t *testing.T, addr string) *sender {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s := &sender{windows: map[uint64][2]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer conn.Close()
		cl := coltracev1.NewTraceServiceClient(conn)
		for id := uint64(1); id < 1e6; id++ {
			select {
			case <-s.stop:
				return
			default:
			}
			var req coltracev1.ExportTraceServiceRequest
			if err := req.UnmarshalVT(traceBody(t, 0, id)); err != nil {
				t.Error(err)
				return
			}
			lo := s.installed.Load()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			_, err := cl.Export(ctx, &req)
			cancel()
			if err != nil {
				continue // refused: not acknowledged, so nothing is owed
			}
			s.mu.Lock()
			s.windows[id] = [2]int64{lo, s.started.Load()}
			s.mu.Unlock()
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return s
}

// settle waits (bounded) until n ids were acknowledged wholly within generation gen, so that
// every generation is proven by spans of its own, however slow the machine.
func (s *sender) settle(t *testing.T, gen int64, n int) {
	t.Helper()
	eventually(t, func() string { return fmt.Sprintf("fewer than %d spans acknowledged in generation %d", n, gen) }, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		c := 0
		for _, w := range s.windows {
			if w[0] == gen && w[1] == gen {
				c++
			}
		}
		return c >= n
	})
}

// acked stops the sender and returns the windows of the acknowledged ids.
func (s *sender) acked() map[uint64][2]int64 {
	close(s.stop)
	<-s.done
	return s.windows
}

// checkDelivered waits (bounded) until every acknowledged id reached every upstream that was
// configured in every generation of its window, and checks that none reached an upstream
// configured in none of them. sets[g] names the upstreams of generation g.
func checkDelivered(t *testing.T, acked map[uint64][2]int64, sets [][]string, ups map[string]*upstream) {
	t.Helper()
	perGen := make([]int, len(sets))
	eventually(t, func() string {
		for id, w := range acked {
			for name := range ups {
				if in(sets, w, name, true) && ups[name].count(id) == 0 {
					return fmt.Sprintf("span %d (generations %d..%d) never reached %s", id, w[0], w[1], name)
				}
			}
		}
		return ""
	}, func() bool {
		for id, w := range acked {
			for name := range ups {
				if in(sets, w, name, true) && ups[name].count(id) == 0 {
					return false
				}
			}
		}
		return true
	})
	for id, w := range acked {
		for name, u := range ups {
			if !in(sets, w, name, false) && u.count(id) > 0 {
				t.Errorf("span %d (generations %d..%d) reached %s, configured in none of them", id, w[0], w[1], name)
			}
		}
		if w[0] == w[1] {
			perGen[w[0]]++
		}
	}
	for g, n := range perGen {
		if n == 0 {
			t.Errorf("no span was acknowledged wholly within generation %d: the test proves nothing there", g)
		}
	}
	t.Logf("%d spans acknowledged; wholly within each generation: %v", len(acked), perGen)
}

// counterValue is a counter of the default registry summed over the series of destination.
func counterValue(t *testing.T, name, destination string) float64 {
	t.Helper()
	return seriesSum(t, name, destination)
}

// gaugeValue is a gauge of the default registry summed over the series of destination.
func gaugeValue(t *testing.T, name, destination string) float64 {
	t.Helper()
	return seriesSum(t, name, destination)
}

// seriesSum sums the counter or gauge series of name labelled with destination.
func seriesSum(t *testing.T, name, destination string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "destination" && l.GetValue() == destination {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// in reports whether name is in every (all) or some (!all) set of window w.
func in(sets [][]string, w [2]int64, name string, all bool) bool {
	for g := w[0]; g <= w[1]; g++ {
		has := false
		for _, n := range sets[g] {
			has = has || n == name
		}
		if has != all {
			return !all
		}
	}
	return all
}

// While spans flow, -dest.file is rewritten and reloaded: a destination added, one removed
// (slow, with batches in flight), one changed, an invalid file (which changes nothing), and the
// removed one back. Every acknowledged span reaches every destination configured while it was
// admitted, and none that was not; the reloads and the failure are counted.
func TestDestFileReloadWhileAdmitting(t *testing.T) {
	ups := map[string]*upstream{"a": startUpstream(t), "b": startUpstream(t), "c": startUpstream(t)}
	ups["b"].delay = 5 * time.Millisecond
	path := filepath.Join(t.TempDir(), "dests")
	cfg := testConfig()
	cfg.DestFile, cfg.DestFilePoll = path, 0
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	spec := func(name string, extra ...string) string { return destSpec(name, ups[name].addr, extra...) }
	writeFile(t, path, "# the first set", spec("a"), spec("b"))
	g := startGateway(t, cfg)
	reloads, failures := testutil.ToFloat64(configReloads), testutil.ToFloat64(configReloadFailures)

	s := startSender(t, g.GRPCAddr().String())
	sets := [][]string{{"a", "b"}}
	step := func(want []string, lines ...string) {
		t.Helper()
		s.settle(t, int64(len(sets)-1), 20) // spans flow in the generation before
		gen := int64(len(sets))
		sets = append(sets, want)
		s.started.Store(gen)
		writeFile(t, path, lines...)
		err := g.Reload()
		if (err != nil) != (want == nil) {
			t.Fatalf("generation %d: Reload: %v", gen, err)
		}
		if want == nil {
			sets[gen] = sets[gen-1] // refused: the set that ran keeps running
		}
		s.installed.Store(gen)
	}
	step([]string{"a", "b", "c"}, spec("a"), spec("b"), spec("c"))
	step([]string{"a", "c"}, spec("a"), spec("c"))
	// a stalls while it is changed: its old instance holds queued batches, which it hands
	// over to the new one, and calls in flight, which it waits for.
	handed := counterValue(t, "otlpgate_client_handed_over_requests_total", "a")
	ups["a"].hold()
	// Its calls in flight (concurrency 8) are held; wait until a batch queues behind them (the
	// bytes it holds grow past those of the held calls), or the change finds nothing to hand
	// over.
	eventually(t, func() string { return "a's calls in flight were not all held" }, func() bool {
		return gaugeValue(t, "otlpgate_client_in_flight_requests", "a") >= 8
	})
	inFlight := gaugeValue(t, "otlpgate_client_queue_bytes", "a")
	eventually(t, func() string { return "no batch queued behind the held calls of a" }, func() bool {
		return gaugeValue(t, "otlpgate_client_queue_bytes", "a") > inFlight
	})
	step([]string{"a", "c"}, spec("a", "concurrency=2"), spec("c"))
	time.Sleep(50 * time.Millisecond)
	ups["a"].release()
	step(nil, spec("a", "concurrency=2"), spec("c"), "name=d,endpoint=127.0.0.1:1,frobnicate=1")
	step([]string{"a", "c", "b"}, spec("a", "concurrency=2"), spec("c"), spec("b"))
	s.settle(t, int64(len(sets)-1), 20)
	acked := s.acked()

	checkDelivered(t, acked, sets, ups)
	if n := counterValue(t, "otlpgate_client_handed_over_requests_total", "a") - handed; n == 0 {
		t.Error("the changed destination handed nothing over: the test did not reach the hand-over")
	} else {
		t.Logf("the changed destination handed %v requests over to its replacement", n)
	}
	if d := testutil.ToFloat64(configReloads) - reloads; d != 4 {
		t.Errorf("otlpgate_config_reloads_total rose by %v, want 4", d)
	}
	if d := testutil.ToFloat64(configReloadFailures) - failures; d != 1 {
		t.Errorf("otlpgate_config_reload_failures_total rose by %v, want 1", d)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// spoolDestFileConfig is a gateway reading its destinations from the file at path, with a
// spool of small segments that checkpoints often; a removed or replaced destination drains for
// a second.
func spoolDestFileConfig(t *testing.T) (path string, cfg Config) {
	path = filepath.Join(t.TempDir(), "dests")
	cfg = testConfig()
	cfg.DestFile, cfg.DestFilePoll = path, 0
	cfg.ShutdownTimeout = time.Second // how long a removed destination drains
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	cfg.Spool = spool.DefaultConfig()
	cfg.Spool.Dir = t.TempDir()
	cfg.Spool.Sync = spool.SyncNone
	cfg.Spool.SegmentBytes = 16 << 10
	cfg.Spool.MaxBytes = 64 << 20
	cfg.Spool.CheckpointInterval = 20 * time.Millisecond
	return path, cfg
}

// With a spool, a destination removed while its upstream stalls keeps its records: spans
// admitted while it was configured and not delivered reach it once it is back, after the
// spans it missed while away were deleted for the others; it never gets those.
func TestDestFileSpoolKeepsRemovedRecords(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	b.hold()
	path, cfg := spoolDestFileConfig(t)
	specA, specB := destSpec("a", a.addr), destSpec("b", b.addr)
	writeFile(t, path, specA, specB)
	g := startGateway(t, cfg)
	send := func(from, to uint64) {
		t.Helper()
		for id := from; id < to; id++ {
			if code := post(t, g, traceBody(t, 512, id)); code != 200 {
				t.Fatalf("POST span %d: %d", id, code)
			}
		}
	}
	arrived := func(u *upstream, from, to uint64) func() bool {
		return func() bool {
			for id := from; id < to; id++ {
				if u.count(id) == 0 {
					return false
				}
			}
			return true
		}
	}
	send(1, 101)
	eventually(t, func() string { return "a did not get 1..100" }, arrived(a, 1, 101))

	writeFile(t, path, specA)
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	send(101, 301) // for a alone, over many segments
	eventually(t, func() string { return "a did not get 101..300" }, arrived(a, 101, 301))
	time.Sleep(cfg.ShutdownTimeout + 100*time.Millisecond) // b's drain gives up: its records stay
	b.release()

	writeFile(t, path, specA, specB)
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	send(301, 351)
	eventually(t, func() string { return "b did not get 1..100 back, and 301..350" }, func() bool {
		return arrived(b, 1, 101)() && arrived(b, 301, 351)()
	})
	eventually(t, func() string { return "a did not get 301..350" }, arrived(a, 301, 351))
	for id := uint64(101); id < 301; id++ {
		if n := b.count(id); n != 0 {
			t.Fatalf("b got span %d, admitted while it was not configured", id)
		}
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// A change of the file is seen by polling: applied once, and an invalid version is counted
// once, however many polls see it, while the destinations that ran go on.
func TestDestFilePolled(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	path := filepath.Join(t.TempDir(), "dests")
	cfg := testConfig()
	cfg.DestFile, cfg.DestFilePoll = path, 10*time.Millisecond
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	writeFile(t, path, destSpec("a", a.addr))
	g := startGateway(t, cfg)
	reloads, failures := testutil.ToFloat64(configReloads), testutil.ToFloat64(configReloadFailures)

	writeFile(t, path, destSpec("a", a.addr), destSpec("b", b.addr))
	eventually(t, func() string { return "the change was not applied" }, func() bool {
		return testutil.ToFloat64(configReloads) > reloads
	})
	if code := post(t, g, traceBody(t, 0, 1)); code != 200 {
		t.Fatalf("POST: %d", code)
	}
	eventually(t, func() string { return "span 1 missing" }, func() bool { return a.count(1) == 1 && b.count(1) == 1 })

	writeFile(t, path, destSpec("a", a.addr), "name=b,endpoint=")
	eventually(t, func() string { return "the invalid file was not counted" }, func() bool {
		return testutil.ToFloat64(configReloadFailures) > failures
	})
	time.Sleep(100 * time.Millisecond) // ten polls more
	if d := testutil.ToFloat64(configReloadFailures) - failures; d != 1 {
		t.Errorf("the invalid file counted %v times, want once", d)
	}
	if d := testutil.ToFloat64(configReloads) - reloads; d != 1 {
		t.Errorf("%v reloads applied, want 1", d)
	}
	if code := post(t, g, traceBody(t, 0, 2)); code != 200 {
		t.Fatalf("POST: %d", code)
	}
	eventually(t, func() string { return "span 2 missing" }, func() bool { return a.count(2) == 1 && b.count(2) == 1 })
}

// A -dest.file that cannot be read or names no destination stops the start.
func TestDestFileInvalidAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dests")
	cfg := testConfig()
	cfg.DestFile = path
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "-dest.file") {
		t.Errorf("missing file: %v", err)
	}
	writeFile(t, path, "# nothing yet")
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "no destination") {
		t.Errorf("empty file: %v", err)
	}
}

// -dest.file with match-header routes, with and without a spool: each destination keeps its
// tenants across a reload that reorders the file, removes one and adds one; every span
// arrives once, at its tenant's destination alone. (Routes number the destinations by
// position, which the reload changes: the pipeline's set carries its routes; each spool
// feeder is given the new routes with its new position.)
func TestDestFileTenantRoutesReload(t *testing.T) {
	for _, spooled := range []bool{false, true} {
		name := "memory"
		if spooled {
			name = "spool"
		}
		t.Run(name, func(t *testing.T) { testDestFileTenantRoutesReload(t, spooled) })
	}
}

func testDestFileTenantRoutesReload(t *testing.T, spooled bool) {
	a, b, c, d := startUpstream(t), startUpstream(t), startUpstream(t), startUpstream(t)
	path := filepath.Join(t.TempDir(), "dests")
	cfg := testConfig()
	if spooled {
		cfg.Spool.Dir = t.TempDir()
	}
	cfg.Tenants.Headers = []string{"x-scope-orgid"}
	cfg.DestFile = path
	cfg.DestFilePoll = 0
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	writeFile(t, path,
		destSpec("a", a.addr, "match-header=x-scope-orgid:acme"),
		destSpec("b", b.addr, "match-header=x-scope-orgid:beta"),
		destSpec("d", d.addr))
	g := startGateway(t, cfg)

	next := uint64(0)
	send := func(tenant string, n int) []uint64 {
		t.Helper()
		var ids []uint64
		for range n {
			next++
			ids = append(ids, next)
		}
		req, err := http.NewRequest("POST", "http://"+g.HTTPAddr().String()+"/v1/traces", bytes.NewReader(traceBody(t, 0, ids...)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Scope-OrgID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST for %s: %d", tenant, resp.StatusCode)
		}
		return ids
	}
	want := map[*upstream]map[uint64]int{a: {}, b: {}, c: {}, d: {}}
	expect := func(u *upstream, ids []uint64) {
		for _, id := range ids {
			want[u][id] = 1
		}
	}
	check := func(when string) {
		t.Helper()
		got := func() string {
			var out []string
			for i, u := range []*upstream{a, b, c, d} {
				u.mu.Lock()
				out = append(out, fmt.Sprintf("%c=%v", 'a'+i, u.ids))
				u.mu.Unlock()
			}
			return strings.Join(out, " ")
		}
		wanted := fmt.Sprintf("a=%v b=%v c=%v d=%v", want[a], want[b], want[c], want[d])
		eventually(t, func() string { return when + ": got " + got() + ", want " + wanted }, func() bool { return got() == wanted })
	}

	expect(a, send("acme", 3))
	expect(b, send("beta", 2))
	expect(d, send("gamma", 2))
	check("before the reload")

	// Reordered, a removed, c added with a's tenant: b and d unchanged, at other positions.
	writeFile(t, path,
		destSpec("d", d.addr),
		destSpec("c", c.addr, "match-header=x-scope-orgid:acme"),
		destSpec("b", b.addr, "match-header=x-scope-orgid:beta"))
	if err := g.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	expect(c, send("acme", 3))
	expect(b, send("beta", 2))
	expect(d, send("gamma", 2))
	expect(b, send("beta", 1))
	check("after the reload")
}

// With a spool, a reload may bring tenant routes to a -dest.file that had none, and take them
// away again: a tenant's request goes to its destination alone while one has a match-header,
// and to every destination before and after.
func TestDestFileSpoolTenantRoutesComeAndGo(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	path := filepath.Join(t.TempDir(), "dests")
	cfg := testConfig()
	cfg.Spool.Dir = t.TempDir()
	cfg.Tenants.Headers = []string{"x-scope-orgid"}
	cfg.DestFile = path
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	writeFile(t, path, destSpec("a", a.addr))
	g := startGateway(t, cfg)
	if code := post(t, g, traceBody(t, 0, 1)); code != 200 {
		t.Fatalf("POST: %d", code)
	}
	eventually(t, func() string { return "span 1 missing at a" }, func() bool { return a.count(1) == 1 })

	writeFile(t, path, destSpec("b", b.addr, "match-header=x-scope-orgid:acme"), destSpec("a", a.addr))
	if err := g.Reload(); err != nil {
		t.Fatalf("reload adding match-header: %v", err)
	}
	postAs := func(tenant string, id uint64) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+g.HTTPAddr().String()+"/v1/traces", bytes.NewReader(traceBody(t, 0, id)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Scope-OrgID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST for %s: %d", tenant, resp.StatusCode)
		}
	}
	postAs("acme", 2)
	postAs("beta", 3)
	eventually(t, func() string { return "spans 2 and 3 missing" }, func() bool { return b.count(2) == 1 && a.count(3) == 1 })

	writeFile(t, path, destSpec("a", a.addr), destSpec("b", b.addr))
	if err := g.Reload(); err != nil {
		t.Fatalf("reload without routes: %v", err)
	}
	postAs("acme", 4)
	eventually(t, func() string { return "span 4 missing" }, func() bool { return a.count(4) == 1 && b.count(4) == 1 })
	if a.count(2) != 0 || b.count(1) != 0 || b.count(3) != 0 {
		t.Errorf("a span reached a destination its routes did not give it: a has 2 %d times, b has 1 %d, 3 %d",
			a.count(2), b.count(1), b.count(3))
	}
}

// A destination a reload removed leaves the status page once it holds nothing, while the ones
// configured stay on it.
func TestDestFileRemovedLeavesStatus(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	path := filepath.Join(t.TempDir(), "dests")
	cfg := testConfig()
	cfg.DestFile = path
	cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
	writeFile(t, path, destSpec("status-a", a.addr), destSpec("status-b", b.addr))
	g := startGateway(t, cfg)
	if code := post(t, g, traceBody(t, 0, 1)); code != 200 {
		t.Fatalf("POST: %d", code)
	}
	eventually(t, func() string { return "span 1 missing" }, func() bool { return a.count(1) == 1 && b.count(1) == 1 })
	listed := func() []string {
		code, body := get(t, g, "/status.json")
		if code != 200 {
			t.Fatalf("/status.json: %d", code)
		}
		var st struct {
			Destinations []struct{ Name, State string }
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range st.Destinations {
			if strings.HasPrefix(d.Name, "status-") {
				names = append(names, d.Name+":"+d.State)
			}
		}
		return names
	}
	eventually(t, func() string { return fmt.Sprintf("status lists %v, want both", listed()) }, func() bool {
		return strings.Join(listed(), " ") == "status-a:ok status-b:ok"
	})

	writeFile(t, path, destSpec("status-a", a.addr))
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if code := post(t, g, traceBody(t, 0, 2)); code != 200 {
		t.Fatalf("POST: %d", code)
	}
	eventually(t, func() string { return "span 2 missing" }, func() bool { return a.count(2) == 1 })
	eventually(t, func() string { return fmt.Sprintf("status lists %v, want status-a alone", listed()) }, func() bool {
		return strings.Join(listed(), " ") == "status-a:ok"
	})
	if b.count(2) != 0 {
		t.Fatal("span 2 reached the removed destination")
	}
}
