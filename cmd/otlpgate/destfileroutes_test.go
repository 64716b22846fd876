package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// routedRun is a -dest.file of tenant-routed destinations, each with its upstream (a
// tenantSink), and what each upstream must hold: the spans sent as each tenant, "tenant/span".
type routedRun struct {
	t     *testing.T
	path  string
	addrs map[string]string // destination: its upstream's address
	sinks map[string]*tenantSink
	want  map[string][]string
	n     int
	g     *gateway
}

func newRoutedRun(t *testing.T, names ...string) *routedRun {
	r := &routedRun{t: t, path: filepath.Join(t.TempDir(), "destinations"),
		addrs: map[string]string{}, sinks: map[string]*tenantSink{}, want: map[string][]string{}}
	for _, n := range names {
		s := startTenantSink(t, "", false)
		r.addrs[n], r.sinks[n] = s.addr, s
	}
	return r
}

// spec is the -dest.file line of destination name, taking the tenants of match ("" the rest).
func (r *routedRun) spec(name, match string) string {
	s := "name=" + name + ",endpoint=" + r.addrs[name] + ",protocol=v1,mode=unary,retry-initial=20ms,retry-max=200ms,forward-headers=x-scope-orgid"
	if match != "" {
		s += ",match-header=x-scope-orgid:" + match
	}
	return s
}

// write replaces the file at once with lines.
func (r *routedRun) write(lines ...string) {
	r.t.Helper()
	if err := os.WriteFile(r.path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(r.path+".tmp", r.path); err != nil {
		r.t.Fatal(err)
	}
}

// send posts count one-span requests as tenant over OTLP/HTTP, each answered 200, and expects
// them at sink.
func (r *routedRun) send(ctx context.Context, sink, tenant string, count int) {
	r.t.Helper()
	for range count {
		r.n++
		id := []byte{0xd, 0xf, 0, 0, 0, 0, 0, byte(r.n)}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.g.http+"/v1/traces",
			bytes.NewReader(oneSpan(bytes.Repeat([]byte{3}, 16), id, r.n)))
		if err != nil {
			r.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Scope-OrgID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			r.t.Fatalf("POST as %s: %d %s", tenant, resp.StatusCode, body)
		}
		r.want[sink] = append(r.want[sink], fmt.Sprintf("%s/%x", tenant, id))
	}
}

// got is what sink received, sorted; nil for an upstream not running.
func (r *routedRun) got(sink string) []string {
	s := r.sinks[sink]
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		for _, id := range c.spans {
			out = append(out, fmt.Sprintf("%s/%x", c.org, id[:]))
		}
	}
	slices.Sort(out)
	return out
}

// check waits until every running upstream holds what it must, and fails unless each holds
// exactly that, each span once; with replayed set, a span an upstream received before a
// kill -9 may have arrived again (a replay is at least once), but nothing it must not hold.
func (r *routedRun) check(when string, replayed bool) {
	r.t.Helper()
	for sink := range r.sinks {
		slices.Sort(r.want[sink])
	}
	testkit.WaitFor(r.t, when+": every span at its tenant's upstream", func() bool {
		for sink := range r.sinks {
			if len(slices.Compact(r.got(sink))) < len(r.want[sink]) {
				return false
			}
		}
		return true
	})
	for sink := range r.sinks {
		g, w := r.got(sink), r.want[sink]
		if replayed {
			g = slices.Compact(g)
		}
		if !slices.Equal(g, w) {
			r.t.Errorf("%s: %s received %q, want %q", when, sink, g, w)
		}
	}
}

// reload applies lines by SIGHUP and waits until the process counted reloads reloads.
func (r *routedRun) reload(reloads float64, lines ...string) {
	r.t.Helper()
	r.write(lines...)
	r.g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(r.t, "the reload to be applied", func() bool {
		return scrape(r.t, r.g.admin, "otlpgate_config_reloads_total") >= reloads
	})
}

// A -dest.file holding match-header routes for two tenants (and a destination taking the
// rest), then a SIGHUP reload whose file reorders the lines, removes one destination and adds
// one with the removed one's tenant: before and after, each tenant's spans reach its own
// upstream alone, with its header, exactly once; the destinations the reload left unchanged
// get nothing twice.
func TestBinaryDestFileTenantRoutesReload(t *testing.T) {
	bin := buildBinary(t)
	r := newRoutedRun(t, "a", "b", "c", "rest")
	r.write(r.spec("a", "acme"), r.spec("b", "beta"), r.spec("rest", ""))
	r.g = startGateway(t, bin, "-dest.file", r.path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms",
		"-intake.headers", "x-scope-orgid")
	waitReady(t, r.g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r.send(ctx, "a", "acme", 3)
	r.send(ctx, "b", "beta", 2)
	r.send(ctx, "rest", "gamma", 2)
	r.check("before the reload", false)

	// Reordered; a removed, c added with acme: b and rest unchanged, at other positions.
	r.reload(1, r.spec("rest", ""), r.spec("c", "acme"), r.spec("b", "beta"))
	r.send(ctx, "c", "acme", 3)
	r.send(ctx, "b", "beta", 2)
	r.send(ctx, "rest", "gamma", 2)
	r.check("after the reload", false)
}

// The same with the spool on: the spooled records carry their tenant, and each destination's
// feeder decides which it takes. Across the reload that reorders, removes and adds, each
// tenant's spans reach its own upstream alone; the spans of a tenant whose added destination's
// upstream is down stay spooled, survive a kill -9, and reach it, and it alone, once the next
// start on the same spool and file finds it up.
func TestBinaryDestFileTenantRoutesSpool(t *testing.T) {
	bin := buildBinary(t)
	r := newRoutedRun(t, "a", "b", "c", "rest")
	// d comes up only after the restart, on the address otlpgate was given while it was down.
	r.addrs["d"] = testkit.FreeAddrs(t, 1)[0]
	flags := []string{"-dest.file", r.path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms",
		"-intake.headers", "x-scope-orgid", "-spool.dir", filepath.Join(t.TempDir(), "spool")}
	r.write(r.spec("a", "acme"), r.spec("b", "beta"), r.spec("rest", ""))
	r.g = startGateway(t, bin, flags...)
	waitReady(t, r.g)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r.send(ctx, "a", "acme", 3)
	r.send(ctx, "b", "beta", 2)
	r.send(ctx, "rest", "gamma", 2)
	r.check("before the reload", false)

	// Reordered; a removed, c added with acme and d with delta (its upstream down): b and rest
	// unchanged, at other positions.
	r.reload(1, r.spec("rest", ""), r.spec("c", "acme"), r.spec("d", "delta"), r.spec("b", "beta"))
	r.send(ctx, "c", "acme", 3)
	r.send(ctx, "d", "delta", 4)
	r.send(ctx, "b", "beta", 2)
	r.send(ctx, "rest", "gamma", 2)
	r.check("after the reload", false)

	kill9(t, r.g)
	r.sinks["d"] = startTenantSink(t, r.addrs["d"], false)
	r.g = startGateway(t, bin, flags...)
	waitReady(t, r.g)
	r.check("after kill -9 and a restart", true)
	if g := r.got("d"); len(g) != 4 || len(slices.Compact(g)) != 4 {
		t.Errorf("d received %q, want each of its 4 spans once", g)
	}
	r.send(ctx, "d", "delta", 2)
	r.send(ctx, "c", "acme", 1)
	r.send(ctx, "b", "beta", 1)
	r.check("sent after the restart", true)
}
