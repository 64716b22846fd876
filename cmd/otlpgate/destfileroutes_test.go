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

// A -dest.file holding match-header routes for two tenants (and a destination taking the
// rest), then a SIGHUP reload whose file reorders the lines, removes one destination and adds
// one with the removed one's tenant: before and after, each tenant's spans reach its own
// upstream alone, with its header, exactly once; the destinations the reload left unchanged
// get nothing twice.
func TestBinaryDestFileTenantRoutesReload(t *testing.T) {
	bin := buildBinary(t)
	sinks := map[string]*tenantSink{}
	for _, n := range []string{"a", "b", "c", "rest"} {
		sinks[n] = startTenantSink(t, "", false)
	}
	spec := func(name, match string) string {
		s := "name=" + name + ",endpoint=" + sinks[name].addr + ",protocol=v1,mode=unary,forward-headers=x-scope-orgid"
		if match != "" {
			s += ",match-header=x-scope-orgid:" + match
		}
		return s
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
	write(spec("a", "acme"), spec("b", "beta"), spec("rest", ""))
	g := startGateway(t, bin, "-dest.file", path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms",
		"-intake.headers", "x-scope-orgid")
	waitReady(t, g)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := map[string][]string{} // sink: "tenant/span" it must hold, each once
	n := 0
	send := func(sink, tenant string, count int) {
		t.Helper()
		for range count {
			n++
			id := []byte{0xd, 0xf, 0, 0, 0, 0, 0, byte(n)}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.http+"/v1/traces",
				bytes.NewReader(oneSpan(bytes.Repeat([]byte{3}, 16), id, n)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("X-Scope-OrgID", tenant)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("POST as %s: %d %s", tenant, resp.StatusCode, body)
			}
			want[sink] = append(want[sink], fmt.Sprintf("%s/%x", tenant, id))
		}
	}
	got := func(sink string) []string {
		s := sinks[sink]
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
	check := func(when string) {
		t.Helper()
		for sink := range sinks {
			slices.Sort(want[sink])
		}
		testkit.WaitFor(t, when+": every span at its tenant's upstream", func() bool {
			for sink := range sinks {
				if len(got(sink)) < len(want[sink]) {
					return false
				}
			}
			return true
		})
		for sink := range sinks {
			if g, w := got(sink), want[sink]; !slices.Equal(g, w) {
				t.Errorf("%s: %s received %q, want %q", when, sink, g, w)
			}
		}
	}

	send("a", "acme", 3)
	send("b", "beta", 2)
	send("rest", "gamma", 2)
	check("before the reload")

	// Reordered; a removed, c added with acme: b and rest unchanged, at other positions.
	write(spec("rest", ""), spec("c", "acme"), spec("b", "beta"))
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload to be applied", func() bool {
		return scrape(t, g.admin, "otlpgate_config_reloads_total") >= 1
	})
	send("c", "acme", 3)
	send("b", "beta", 2)
	send("rest", "gamma", 2)
	check("after the reload")
}
