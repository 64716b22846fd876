package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// writeConfig writes a config file whole (a new file renamed over the old one, as an editor or
// a ConfigMap update does), so that a poll never reads half of it.
func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// holdPort takes a loopback port for the test's duration: an otlpgate told to bind it fails.
func holdPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// getPage returns the body of the admin listener's path.
func getPage(t *testing.T, admin, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A config file's destination takes its headers from the environment and from a file: the
// vendor's endpoint sees them, and no secret appears in a log line, /status.json or the status
// page. The command line overrides the file: the file's -http.listen is a port the test holds,
// the command line's a free one, and otlpgate starts.
func TestBinaryConfigFileSecrets(t *testing.T) {
	bin := buildBinary(t)
	v := startVendor(t)
	dir := t.TempDir()
	const envKey, fileKey, lineKey = "cfg-env-s3cret-5150", "cfg-file-s3cret-2112", "cfg-line-s3cret-1984"
	t.Setenv("OTLPGATE_TEST_CFG_KEY", envKey)
	keyFile := filepath.Join(dir, "basic")
	lineFile := filepath.Join(dir, "token")
	for p, s := range map[string]string{keyFile: "  " + fileKey + "\n", lineFile: lineKey + "\n"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "otlpgate.yaml")
	writeConfig(t, path, `# the vendor, its key from the environment, its credentials from files
http.listen: `+holdPort(t)+`
batch:
  max-age: 10ms
dest:
  - name: vendor
    endpoint: http://`+v.addr+`
    header:
      x-api-key: ${env:OTLPGATE_TEST_CFG_KEY}
      authorization: "Basic ${file:`+keyFile+`}, realm"
  - name=vendor2,endpoint=http://`+v.addr+`,header=x-line-key:${file:`+lineFile+`}
`)
	g := startGateway(t, bin, "-config", path)
	postTwoSpans(t, g.http, 1)
	testkit.WaitFor(t, "2 spans from each destination", func() bool { n, _ := v.seen("x-api-key"); return n == 4 })
	for header, want := range map[string]string{"x-api-key": envKey, "authorization": "Basic " + fileKey + ", realm", "x-line-key": lineKey} {
		_, got := v.seen(header)
		found := false
		for _, h := range got {
			found = found || h == want
		}
		if !found {
			t.Errorf("%s: the vendor saw %q, want %q among them", header, got, want)
		}
	}
	pages := map[string]string{"/status.json": getPage(t, g.admin, "/status.json"), "the status page": getPage(t, g.admin, "/")}
	if !strings.Contains(pages["/status.json"], `"vendor2"`) {
		t.Errorf("/status.json does not show the destinations:\n%s", pages["/status.json"])
	}
	g.cmd.Process.Signal(syscall.SIGHUP) // a reload logs the destinations again
	testkit.WaitFor(t, "the reload", func() bool { return strings.Contains(g.stderr.String(), "config file reloaded") })
	g.terminate(t)
	pages["the log"] = g.stderr.String()
	for where, text := range pages {
		for _, s := range []string{envKey, fileKey, lineKey} {
			if strings.Contains(text, s) {
				t.Errorf("secret %q in %s", s, where)
			}
		}
	}
}

// -check reads the config file with the rest: a good one answers 0 with the file's listeners
// and destinations, without binding a port (the test holds every one) or dialling the
// upstream; an unknown key, a bad value and an unset variable answer 2 naming the line and the
// key, at -check and at a start alike.
func TestBinaryConfigFileCheck(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	up, dialled := countingListener(t)
	grpcAddr, httpAddr, adminAddr := holdPort(t), holdPort(t), holdPort(t)
	sock := filepath.Join(dir, "oc.sock")
	good := filepath.Join(dir, "good.yaml")
	writeConfig(t, good, "grpc.listen: "+grpcAddr+"\nhttp.listen: "+httpAddr+"\nadmin.listen: "+adminAddr+"\nuds.listen: "+sock+
		"\ndest:\n  - name: up\n    endpoint: "+up+"\n")
	stdout, stderr, code := runCLI(t, bin, "-config", good, "-check")
	want := "otlpgate: configuration OK: intakes grpc " + grpcAddr + ", http " + httpAddr + ", uds " + sock + "; destinations up; spool off; ack accept\n"
	if code != 0 || stdout != want {
		t.Errorf("good file: exit %d, stdout %q, want %q\nstderr: %s", code, stdout, want, stderr)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("-check created the socket")
	}

	for _, c := range []struct{ body, want string }{
		{"grpc.listen: " + grpcAddr + "\n# a typo\ngrpc.listn: " + grpcAddr + "\n", `line 3: unknown key "grpc.listn"`},
		{"batch:\n  max-items: lots\n", `line 2: batch.max-items: invalid value "lots": want an integer`},
		{"dest:\n  - name: up\n    endpoint: " + up + "\n    header: {x-api-key: \"${env:OTLPGATE_TEST_UNSET}\"}\n",
			"line 4: dest header x-api-key: environment variable OTLPGATE_TEST_UNSET is not set"},
		{"dest:\n  - name: up\n    endpoint: " + up + "\n    frobnicate: 1\n", `line 2: dest: -dest "name=up,endpoint=` + up + `,frobnicate=1": client: -dest key "frobnicate" is unknown`},
	} {
		bad := filepath.Join(dir, "bad.yaml")
		writeConfig(t, bad, c.body)
		for _, check := range []bool{true, false} {
			args := []string{"-config", bad, "-uds.listen", sock, "-grpc.listen", grpcAddr, "-http.listen", httpAddr, "-admin.listen", adminAddr}
			if check {
				args = append(args, "-check")
			}
			stdout, stderr, code := runCLI(t, bin, args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, "otlpgate: "+bad+" "+c.want) {
				t.Errorf("%q (check %v): exit %d, stdout %q, stderr %q; want exit 2 and %q", c.body, check, code, stdout, stderr, c.want)
			}
		}
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("the upstream was dialled %d times", n)
	}
}

// once is each span of ids counted once, as sameSpans compares it with what an upstream got.
func once(ids ...map[pcommon.SpanID]bool) map[pcommon.SpanID]int {
	out := map[pcommon.SpanID]int{}
	for _, m := range ids {
		for id := range m {
			out[id]++
		}
	}
	return out
}

// SIGHUP applies a config file's new destination list while otlpgate runs: the spans sent
// after it reach the new upstream, those before the old one, each exactly once. A change of a
// key that takes a restart is logged by name and not applied; an invalid edit is logged,
// counted, and keeps the running configuration, whose destination goes on receiving.
func TestBinaryConfigFileReload(t *testing.T) {
	bin := buildBinary(t)
	a, b := startCollectorHTTP(t), startCollectorHTTP(t)
	path := filepath.Join(t.TempDir(), "otlpgate.yaml")
	config := func(dest, queue string) string {
		return "batch.max-age: 10ms\nqueue.max-bytes: " + queue + "\ndest:\n  - name: " + dest + "\n    endpoint: " + map[string]string{"a": a.url, "b": b.url}[dest] + "\n"
	}
	writeConfig(t, path, config("a", "64MiB"))
	g := startGateway(t, bin, "-config", path, "-config.poll-interval", "0")
	lines := func(s string) int { return strings.Count(g.stderr.String(), s) }

	first := sendSDKSpans(t, g.http, false, 5)
	testkit.WaitFor(t, "5 spans at a", func() bool { got, _ := a.spans(); return len(got) == 5 })

	writeConfig(t, path, config("b", "32MiB"))
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return lines("config file reloaded") == 1 })
	second := sendSDKSpans(t, g.http, false, 5)
	testkit.WaitFor(t, "5 spans at b", func() bool { got, _ := b.spans(); return len(got) == 5 })

	// An invalid edit: the running configuration stays, b receives.
	writeConfig(t, path, config("a", "32MiB")+"batch.max-itmes: 5\n")
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the refused reload", func() bool { return lines("cannot reload the config file") == 1 })
	if n := scrape(t, g.admin, "otlpgate_config_reload_failures_total"); n != 1 {
		t.Errorf("otlpgate_config_reload_failures_total = %v, want 1", n)
	}
	third := sendSDKSpans(t, g.http, false, 5)
	testkit.WaitFor(t, "10 spans at b", func() bool { got, _ := b.spans(); return len(got) == 10 })
	g.terminate(t)

	gotA, badA := a.spans()
	gotB, badB := b.spans()
	if !sameSpans(gotA, once(first)) || !sameSpans(gotB, once(second, third)) || badA+badB != 0 {
		t.Errorf("a got %d spans (want the first 5 once each), b %d (want the 10 after the reload once each); refused %d, %d", len(gotA), len(gotB), badA, badB)
	}
	l := g.stderr.String()
	for _, want := range []string{
		`msg="config file: a changed key is not applied: it takes a restart" file=` + path + " key=queue.max-bytes",
		"msg=\"config file reloaded\" file=" + path + " trigger=reload applied=[dest] refused=[] need_restart=[queue.max-bytes]",
		"removed=[a]",
		`line 6: unknown key \"batch.max-itmes\"`,
	} {
		if !strings.Contains(l, want) {
			t.Errorf("the log lacks %q:\n%s", want, l)
		}
	}
	if n := strings.Count(l, "key=queue.max-bytes"); n != 1 {
		t.Errorf("queue.max-bytes named %d times, want once (the refused reload names nothing)", n)
	}
}

// A change of the config file is seen by polling it, as -dest.file's is, and applied like a
// SIGHUP.
func TestBinaryConfigFileChangePolled(t *testing.T) {
	bin := buildBinary(t)
	a, b := startCollectorHTTP(t), startCollectorHTTP(t)
	path := filepath.Join(t.TempDir(), "otlpgate.yaml")
	writeConfig(t, path, "batch.max-age: 10ms\ndest:\n  - name=a,endpoint="+a.url+"\n")
	g := startGateway(t, bin, "-config", path, "-config.poll-interval", "20ms")
	first := sendSDKSpans(t, g.http, false, 3)
	testkit.WaitFor(t, "3 spans at a", func() bool { got, _ := a.spans(); return len(got) == 3 })
	writeConfig(t, path, "batch.max-age: 10ms\ndest:\n  - name=b,endpoint="+b.url+"\n")
	testkit.WaitFor(t, "the reload", func() bool { return strings.Contains(g.stderr.String(), "trigger=changed applied=[dest]") })
	second := sendSDKSpans(t, g.http, false, 3)
	testkit.WaitFor(t, "3 spans at b", func() bool { got, _ := b.spans(); return len(got) == 3 })
	g.terminate(t)
	gotA, _ := a.spans()
	gotB, _ := b.spans()
	if !sameSpans(gotA, once(first)) || !sameSpans(gotB, once(second)) {
		t.Errorf("a got %d spans, b %d: want the 3 before the change at a, the 3 after at b, once each", len(gotA), len(gotB))
	}
}

// postTenantSpans sends one OTLP/HTTP request of n spans of tenant (x-scope-orgid) to addr and
// returns the status it was answered with.
func postTenantSpans(t *testing.T, addr, tenant string, n int, seed byte) int {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := range n {
		sp := ss.AppendEmpty()
		sp.SetName(tenant)
		sp.SetTraceID(pcommon.TraceID{seed, 1})
		sp.SetSpanID(pcommon.SpanID{seed, byte(i), 1})
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// SIGHUP applies a config file's new processing steps and tenant rate while otlpgate runs: a
// tenant that spent its burst at 1 item/s is served again at once under the new rate, and
// the spans after the reload carry the new resource attribute, those before the old one.
func TestBinaryConfigFileReloadsStepsAndRate(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	path := filepath.Join(t.TempDir(), "otlpgate.yaml")
	config := func(stage, rate, burst string) string {
		return "batch.max-age: 10ms\nintake.headers: x-scope-orgid\ntenant:\n  rate: " + rate + "\n  burst: " + burst +
			"\nresource.set: [stage=" + stage + "]\ndest:\n  - name=up,endpoint=" + up.Addr() + "\n"
	}
	writeConfig(t, path, config("one", "1items/s", "100items"))
	g := startGateway(t, bin, "-config", path, "-config.poll-interval", "0")
	waitReady(t, g)
	if code := postTenantSpans(t, g.http, "acme", 100, 1); code != http.StatusOK {
		t.Fatalf("within the burst: %d", code)
	}
	// The bucket is empty: 100 more items take 100s at 1 item/s.
	if code := postTenantSpans(t, g.http, "acme", 100, 2); code != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d, want 429", code)
	}
	testkit.WaitFor(t, "100 spans", func() bool { n, _, _ := spans(up); return n == 100 })

	writeConfig(t, path, config("two", "1000000items/s", "1000000items"))
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return strings.Contains(g.stderr.String(), "config file reloaded") })
	for i := range 3 {
		if code := postTenantSpans(t, g.http, "acme", 100, byte(3+i)); code != http.StatusOK {
			t.Fatalf("under the new rate: %d", code)
		}
	}
	testkit.WaitFor(t, "400 spans", func() bool { n, _, _ := spans(up); return n == 400 })
	g.terminate(t)

	stages := map[string]int{}
	_, _, resources := spans(up)
	for _, r := range resources {
		stages[fmt.Sprint(r["stage"])]++
	}
	n, _, _ := spans(up)
	if n != 400 || stages["one"] == 0 || stages["two"] == 0 || stages["one"]+stages["two"] != len(resources) {
		t.Errorf("%d spans, resources by stage %v: want 400, the first request's at stage one, the rest at two", n, stages)
	}
	// Span ids say which request a resource came from: seed 1 before the reload, 3 to 5 after.
	for _, td := range up.Traces() {
		for i := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(i)
			stage, _ := rs.Resource().Attributes().Get("stage")
			seed := rs.ScopeSpans().At(0).Spans().At(0).SpanID()[0]
			if want := map[bool]string{true: "one", false: "two"}[seed == 1]; stage.Str() != want {
				t.Errorf("a span of request %d has stage %q, want %q", seed, stage.Str(), want)
			}
		}
	}
	want := "applied=\"[resource.set tenant.burst tenant.rate]\" refused=[] need_restart=[]"
	if l := g.stderr.String(); !strings.Contains(l, want) {
		t.Errorf("the reload line lacks %s:\n%s", want, l)
	}
}

// A secret moved to a new file: the config file's destination is edited to read the new
// file and the old one is deleted before the SIGHUP, as a secret manager rotating into a new
// path does. The reload applies (what runs is never read again from the old files), and the
// upstream sees the new value from then on.
func TestBinaryConfigFileSecretMoved(t *testing.T) {
	bin := buildBinary(t)
	v := startVendor(t)
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one"), filepath.Join(dir, "two")
	for f, val := range map[string]string{one: "t0ken-one\n", two: "t0ken-two\n"} {
		if err := os.WriteFile(f, []byte(val), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "otlpgate.yaml")
	config := func(file string) string {
		return "batch.max-age: 10ms\ndest:\n  - name=v,endpoint=http://" + v.addr + ",header-file=x-vendor-token:" + file + "\n"
	}
	writeConfig(t, path, config(one))
	g := startGateway(t, bin, "-config", path, "-config.poll-interval", "0")
	postTwoSpans(t, g.http, 1)
	testkit.WaitFor(t, "2 spans", func() bool { n, _ := v.seen("x-vendor-token"); return n == 2 })

	writeConfig(t, path, config(two))
	if err := os.Remove(one); err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool {
		l := g.stderr.String()
		return strings.Contains(l, "config file reloaded") || strings.Contains(l, "cannot reload")
	})
	postTwoSpans(t, g.http, 2)
	testkit.WaitFor(t, "4 spans", func() bool { n, _ := v.seen("x-vendor-token"); return n == 4 })
	g.terminate(t)
	if _, got := v.seen("x-vendor-token"); len(got) != 2 || got[0] != "t0ken-one" || got[1] != "t0ken-two" {
		t.Errorf("x-vendor-token: %q, want t0ken-one then t0ken-two\n%s", got, g.stderr.String())
	}
	if l := g.stderr.String(); strings.Contains(l, "cannot reload") || strings.Contains(l, "t0ken") {
		t.Errorf("the reload was refused, or a token is logged:\n%s", l)
	}
}
