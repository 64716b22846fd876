package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// resRoutedRun is a -dest.file (or a config file's dest list) of destinations routed by
// resource attribute (match=resource:service.name=...), each upstream a strictsink by the
// name of the service it is for, and the spans each upstream must hold, "service/spanid".
type resRoutedRun struct {
	t     *testing.T
	path  string
	addrs map[string]string // upstream: its address
	sinks map[string]*strictsink.Sink
	want  map[string][]string
	n     int
	g     *gateway
}

func newResRoutedRun(t *testing.T, upstreams ...string) *resRoutedRun {
	r := &resRoutedRun{t: t, path: filepath.Join(t.TempDir(), "destinations"),
		addrs: map[string]string{}, sinks: map[string]*strictsink.Sink{}, want: map[string][]string{}}
	for _, u := range upstreams {
		s := startUpstream(t)
		r.addrs[u], r.sinks[u] = s.Addr(), s
	}
	return r
}

// spec is the -dest line of destination name, sending to upstream up, taking the resources
// whose service.name is match ("" the rest).
func (r *resRoutedRun) spec(name, up, match string) string {
	s := "name=" + name + ",endpoint=" + r.addrs[up] + ",protocol=v1,mode=unary,retry-initial=20ms,retry-max=200ms"
	if match != "" {
		s += ",match=resource:service.name=" + match
	}
	return s
}

// write replaces the file at once with lines.
func (r *resRoutedRun) write(lines ...string) {
	r.t.Helper()
	if err := os.WriteFile(r.path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(r.path+".tmp", r.path); err != nil {
		r.t.Fatal(err)
	}
}

// send posts count requests over OTLP/HTTP, each of one resource per service of to (two
// spans each), each answered 200, and expects each service's spans at the upstream to names
// for it.
func (r *resRoutedRun) send(ctx context.Context, count int, to map[string]string) {
	r.t.Helper()
	svcs := make([]string, 0, len(to))
	for s := range to {
		svcs = append(svcs, s)
	}
	slices.Sort(svcs)
	for range count {
		td := ptrace.NewTraces()
		for _, svc := range svcs {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", svc)
			sps := rs.ScopeSpans().AppendEmpty().Spans()
			for range 2 {
				r.n++
				id := pcommon.SpanID{0xe, byte(r.n >> 16), byte(r.n >> 8), byte(r.n)}
				sp := sps.AppendEmpty()
				sp.SetSpanID(id)
				sp.SetTraceID(pcommon.TraceID{0xe, byte(r.n >> 8), byte(r.n)})
				sp.SetName(svc)
				r.want[to[svc]] = append(r.want[to[svc]], fmt.Sprintf("%s/%x", svc, id[:]))
			}
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			r.t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.g.http+"/v1/traces", bytes.NewReader(body))
		if err != nil {
			r.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			r.t.Fatalf("POST: %d", resp.StatusCode)
		}
	}
}

// got is what upstream u received, "service/spanid", sorted; nil for one not running.
func (r *resRoutedRun) got(u string) []string {
	s := r.sinks[u]
	if s == nil {
		return nil
	}
	var out []string
	for _, td := range s.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					id := sp.SpanID()
					out = append(out, fmt.Sprintf("%s/%x", svc.Str(), id[:]))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// check waits until every running upstream holds what it must, and fails unless each holds
// exactly that, each span once; with replayed set, a span an upstream received before a
// kill -9 may have arrived again (a replay is at least once), but nothing it must not hold.
func (r *resRoutedRun) check(when string, replayed bool) {
	r.t.Helper()
	for u := range r.sinks {
		slices.Sort(r.want[u])
	}
	testkit.WaitFor(r.t, when+": every span at its service's upstream", func() bool {
		for u := range r.sinks {
			if len(slices.Compact(r.got(u))) < len(r.want[u]) {
				return false
			}
		}
		return true
	})
	for u := range r.sinks {
		g, w := r.got(u), r.want[u]
		if replayed {
			g = slices.Compact(g)
		}
		if !slices.Equal(g, w) {
			r.t.Errorf("%s: %s received %q, want %q", when, u, g, w)
		}
	}
}

// reload applies lines, by SIGHUP unless polled, and waits until the process counted reloads
// reloads.
func (r *resRoutedRun) reload(polled bool, reloads float64, lines ...string) {
	r.t.Helper()
	r.write(lines...)
	if !polled {
		r.g.cmd.Process.Signal(syscall.SIGHUP)
	}
	testkit.WaitFor(r.t, "the reload to be applied", func() bool {
		return scrape(r.t, r.g.admin, "otlpgate_config_reloads_total") >= reloads
	})
	if n := scrape(r.t, r.g.admin, "otlpgate_config_reload_failures_total"); n != 0 {
		r.t.Fatalf("%v reloads refused:\n%s", n, r.g.stderr.String())
	}
}

// A -dest.file with two destinations routed by resource attribute (co takes service.name
// checkout, rest the rest), reloaded by SIGHUP: reordered with cart added (service.name
// cart), then co renamed to checkout (the same upstream) and cart removed. Before and after
// each reload every span reaches the upstream of its service's destination alone, exactly
// once: a destination keeps its resources whatever line it moved to.
func TestBinaryDestFileResourceRoutesReload(t *testing.T) {
	bin := buildBinary(t)
	r := newResRoutedRun(t, "co", "cart", "rest")
	r.write(r.spec("co", "co", "checkout"), r.spec("rest", "rest", ""))
	r.g = startGateway(t, bin, "-dest.file", r.path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms")
	waitReady(t, r.g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r.send(ctx, 3, map[string]string{"checkout": "co", "cart": "rest", "search": "rest"})
	r.send(ctx, 1, map[string]string{"checkout": "co"})
	r.check("before the reloads", false)

	// Reordered, cart added: rest and co unchanged, at other positions.
	r.reload(false, 1, r.spec("rest", "rest", ""), r.spec("cart", "cart", "cart"), r.spec("co", "co", "checkout"))
	r.send(ctx, 3, map[string]string{"checkout": "co", "cart": "cart", "search": "rest"})
	r.check("after the first reload", false)

	// co renamed checkout, cart removed, reordered again.
	r.reload(false, 2, r.spec("checkout", "co", "checkout"), r.spec("rest", "rest", ""))
	r.send(ctx, 3, map[string]string{"checkout": "co", "cart": "rest", "search": "rest"})
	r.check("after the second reload", false)
}

// The same with the spool on and the file polled: each spooled record carries the resources
// some destination took when it was admitted, and each destination's feeder keeps its own by
// the routes the record was spooled under. The reload adds cart, whose upstream is down: its
// spans stay spooled, survive a kill -9, and reach it, and it alone, once the next start on
// the same spool and file finds it up; the reload after renames co and removes cart.
func TestBinaryDestFileResourceRoutesSpool(t *testing.T) {
	bin := buildBinary(t)
	r := newResRoutedRun(t, "co", "rest")
	// cart comes up only after the restart, on the address otlpgate was given while it was
	// down.
	r.addrs["cart"] = testkit.FreeAddrs(t, 1)[0]
	flags := []string{"-dest.file", r.path, "-dest.file.poll-interval", "20ms", "-batch.max-age", "5ms",
		"-spool.dir", filepath.Join(t.TempDir(), "spool")}
	r.write(r.spec("co", "co", "checkout"), r.spec("rest", "rest", ""))
	r.g = startGateway(t, bin, flags...)
	waitReady(t, r.g)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r.send(ctx, 3, map[string]string{"checkout": "co", "cart": "rest", "search": "rest"})
	r.check("before the reload", false)

	r.reload(true, 1, r.spec("rest", "rest", ""), r.spec("cart", "cart", "cart"), r.spec("co", "co", "checkout"))
	r.send(ctx, 3, map[string]string{"checkout": "co", "cart": "cart", "search": "rest"})
	r.check("after the reload", false)

	kill9(t, r.g)
	cart, err := strictsink.Start(r.addrs["cart"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cart.Close)
	r.sinks["cart"] = cart
	r.g = startGateway(t, bin, flags...)
	waitReady(t, r.g)
	r.check("after kill -9 and a restart", true)
	if g := r.got("cart"); len(g) != 6 || len(slices.Compact(g)) != 6 {
		t.Errorf("cart received %q, want each of its 6 spans once", g)
	}
	r.send(ctx, 2, map[string]string{"checkout": "co", "cart": "cart", "search": "rest"})
	r.check("sent after the restart", true)

	// co renamed checkout, cart removed (it has delivered all it had).
	r.reload(true, 1, r.spec("checkout", "co", "checkout"), r.spec("rest", "rest", ""))
	r.send(ctx, 2, map[string]string{"checkout": "co", "cart": "rest", "search": "rest"})
	r.check("after the reload that renames and removes", true)
}

// A config file's dest list with match=resource routes, reordered with a destination added on
// SIGHUP: applied while otlpgate runs (it was refused as taking a restart), each span at the
// upstream of its service's destination, once.
func TestBinaryConfigFileResourceRoutesReload(t *testing.T) {
	bin := buildBinary(t)
	r := newResRoutedRun(t, "co", "cart", "rest")
	r.path = filepath.Join(t.TempDir(), "otlpgate.yaml")
	config := func(specs ...string) string {
		s := "batch.max-age: 5ms\ndest:\n"
		for _, d := range specs {
			s += "  - " + d + "\n"
		}
		return s
	}
	writeConfig(t, r.path, config(r.spec("co", "co", "checkout"), r.spec("rest", "rest", "")))
	r.g = startGateway(t, bin, "-config", r.path, "-config.poll-interval", "0")
	waitReady(t, r.g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.send(ctx, 2, map[string]string{"checkout": "co", "cart": "rest", "search": "rest"})
	r.check("before the reload", false)

	writeConfig(t, r.path, config(r.spec("rest", "rest", ""), r.spec("cart", "cart", "cart"), r.spec("co", "co", "checkout")))
	r.g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return strings.Contains(r.g.stderr.String(), "config file reloaded") })
	if l := r.g.stderr.String(); !strings.Contains(l, "applied=[dest]") || !strings.Contains(l, "added=[cart]") {
		t.Fatalf("the reload did not apply the destinations:\n%s", l)
	}
	r.send(ctx, 2, map[string]string{"checkout": "co", "cart": "cart", "search": "rest"})
	r.check("after the reload", false)
}
