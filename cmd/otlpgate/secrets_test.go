package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// vendor is a stand-in for a vendor's OTLP/HTTP endpoint behind the Collector's confighttp: it
// records the headers each trace request came with and the spans it held.
type vendor struct {
	addr string
	mu   sync.Mutex
	reqs []vendorReq
}

type vendorReq struct {
	header http.Header
	spans  int
}

func startVendor(t *testing.T) *vendor {
	t.Helper()
	v := &vendor{}
	v.addr = strictsink.ServeCollectorHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v.mu.Lock()
		v.reqs = append(v.reqs, vendorReq{header: r.Header.Clone(), spans: req.Traces().SpanCount()})
		v.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	return v
}

// seen returns the spans received and the distinct values of header among the requests.
func (v *vendor) seen(header string) (spans int, values []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.reqs {
		spans += r.spans
		if h := strings.Join(r.header.Values(header), "|"); len(values) == 0 || values[len(values)-1] != h {
			values = append(values, h)
		}
	}
	return spans, values
}

// Secrets come from the environment and from files, in a -dest flag and in a -dest.file line,
// and reach the vendor's endpoint as the headers they fill; none appears in a log line,
// /status.json or the status page. A SIGHUP reads the files of -dest.file again: the vendor then
// sees the new key, and the new value of a header-file. $${ sends a literal ${.
func TestBinarySecretsFromEnvAndFiles(t *testing.T) {
	bin := buildBinary(t)
	a, b := startVendor(t), startVendor(t)
	dir := t.TempDir()
	const envKey, fileKey, fileKey2, rotated = "env-s3cret-4711", "file-s3cret-0815", "basic-s3cret-1234", "rotated-s3cret-9999"
	const token, token2 = "vendor-t0ken-1", "vendor-t0ken-2"
	t.Setenv("OTLPGATE_TEST_VENDOR_KEY", envKey)
	keyFile, authFile, tokenFile := filepath.Join(dir, "key"), filepath.Join(dir, "auth"), filepath.Join(dir, "token")
	for p, v := range map[string]string{keyFile: fileKey + "\n", authFile: "  Basic " + fileKey2 + "\n", tokenFile: token + "\n"} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	destFile := filepath.Join(dir, "dests")
	if err := os.WriteFile(destFile, []byte("name=b,protocol=http,endpoint=http://"+b.addr+",header=authorization:${file:"+authFile+"},header-file=x-vendor-token:"+tokenFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, "-batch.max-age", "10ms", "-dest.file", destFile, "-dest.file.poll-interval", "0",
		"-dest", "name=a,protocol=http,endpoint=http://"+a.addr+",header=x-api-key:${env:OTLPGATE_TEST_VENDOR_KEY},header=x-tenant:${file:"+keyFile+"},header=x-lit:$${env:X}")
	post := func(seed uint64) {
		t.Helper()
		body, _ := otlpgen.New(seed).Spans(otlpgen.Shape{Spans: 3, Attrs: 2}).MarshalVT()
		resp, err := http.Post("http://"+g.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST: %d", resp.StatusCode)
		}
	}
	post(1)
	testkit.WaitFor(t, "3 spans at each vendor", func() bool {
		na, _ := a.seen("x-api-key")
		nb, _ := b.seen("authorization")
		return na == 3 && nb == 3
	})
	for _, c := range []struct {
		v      *vendor
		header string
		want   string
	}{{a, "x-api-key", envKey}, {a, "x-tenant", fileKey}, {a, "x-lit", "${env:X}"}, {b, "authorization", "Basic " + fileKey2}, {b, "x-vendor-token", token}} {
		if _, got := c.v.seen(c.header); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: %q, want %q", c.header, got, c.want)
		}
	}

	// The key and the token of b's line are rotated: a SIGHUP reads them again and b is
	// replaced with them.
	if err := os.WriteFile(authFile, []byte("Basic "+rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token2), 0o600); err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return strings.Contains(g.stderr.String(), "destinations reloaded") })
	post(2)
	testkit.WaitFor(t, "6 spans at b", func() bool { n, _ := b.seen("authorization"); return n == 6 })
	if _, got := b.seen("authorization"); len(got) != 2 || got[1] != "Basic "+rotated {
		t.Errorf("authorization after the reload: %q, want the rotated key last", got)
	}
	if _, got := b.seen("x-vendor-token"); len(got) != 2 || got[1] != token2 {
		t.Errorf("x-vendor-token after the reload: %q, want the rotated token last", got)
	}

	var pages []string
	for _, path := range []string{"/status.json", "/"} {
		resp, err := http.Get("http://" + g.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pages = append(pages, string(p))
	}
	g.terminate(t)
	for i, where := range append(pages, g.stderr.String()) {
		for _, s := range []string{envKey, fileKey, fileKey2, rotated, token, token2} {
			if strings.Contains(where, s) {
				t.Errorf("secret %q in %s", s, []string{"/status.json", "the status page", "the log"}[i])
			}
		}
	}
}

// A reference that cannot be resolved stops the start, and -check, with an error naming the
// flag and the variable or file, never a value.
func TestBinaryUnresolvedReferences(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "dests")
	if err := os.WriteFile(bad, []byte("# vendor\nname=b,endpoint=127.0.0.1:1,header=k:${env:OTLPGATE_TEST_UNSET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args      []string
		want      string
		startCode int // -dest.file is read when the gateway is built: a start that cannot is exit 1
	}{
		{[]string{"-dest", "name=a,endpoint=127.0.0.1:1,header=x-api-key:${env:OTLPGATE_TEST_UNSET}"},
			"otlpgate: -dest: environment variable OTLPGATE_TEST_UNSET is not set (${env:OTLPGATE_TEST_UNSET})", exitUsage},
		{[]string{"-resource.set=k8s.node.name=${env:OTLPGATE_TEST_UNSET}"}, "otlpgate: -resource.set: environment variable OTLPGATE_TEST_UNSET is not set", exitUsage},
		{[]string{"-grpc.auth.token-file", "${file:" + filepath.Join(dir, "none") + "}"}, "otlpgate: -grpc.auth.token-file: ${file:" + filepath.Join(dir, "none") + "}: open ", exitUsage},
		{[]string{"-dest.file", bad}, "-dest.file " + bad + ": line 2: environment variable OTLPGATE_TEST_UNSET is not set", exitFailed},
	} {
		for _, check := range []bool{false, true} {
			args, want := c.args, c.startCode
			if check {
				args, want = append(slices.Clone(args), "-check"), exitUsage
			}
			out, err := runBinary(t, bin, args...)
			if code := exitCode(err); code != want || !strings.Contains(string(out), c.want) {
				t.Errorf("%v: exit %d, output %q, want exit %d and %q", args, code, out, want, c.want)
			}
		}
	}
}

// exitCode is the exit status in err from a finished exec.Cmd (0 for nil, -1 when it did not
// exit on its own).
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A -dest flag's header-file is read again on SIGHUP without -dest.file too: the destination
// is replaced with the rotated value, and the log names it changed.
func TestBinaryHeaderFileReloaded(t *testing.T) {
	bin := buildBinary(t)
	v := startVendor(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, "-batch.max-age", "10ms", "-dest", "name=v,endpoint=http://"+v.addr+",header-file=x-vendor-token:"+tokenFile)
	post := func(seed uint64) { t.Helper(); postTwoSpans(t, g.http, seed) }
	post(1)
	testkit.WaitFor(t, "2 spans", func() bool { n, _ := v.seen("x-vendor-token"); return n == 2 })
	if err := os.WriteFile(tokenFile, []byte("t0ken-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return strings.Contains(g.stderr.String(), "destinations reloaded") })
	post(2)
	testkit.WaitFor(t, "4 spans", func() bool { n, _ := v.seen("x-vendor-token"); return n == 4 })
	if _, got := v.seen("x-vendor-token"); len(got) != 2 || got[0] != "t0ken-one" || got[1] != "t0ken-two" {
		t.Errorf("x-vendor-token: %q, want t0ken-one then t0ken-two", got)
	}
	g.terminate(t)
	if l := g.stderr.String(); !reloadedChanged(l)["v"] || strings.Contains(l, "t0ken") {
		t.Errorf("the reload does not name v changed, or a token is logged:\n%s", l)
	}
}

// postTwoSpans sends a request of two spans to the OTLP/HTTP intake at addr; it must be
// answered 200.
func postTwoSpans(t *testing.T, addr string, seed uint64) {
	t.Helper()
	body, _ := otlpgen.New(seed).Spans(otlpgen.Shape{Spans: 2, Attrs: 2}).MarshalVT()
	resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}

// A -dest flag's bearer-token-file is read again on SIGHUP, as a header-file is: the upstream
// sees the rotated token on the requests sent after the reload, the old one on those before.
// A token file that cannot be read at a reload (emptied, removed) keeps the running
// destination and its token, with an error naming the file; no token is ever logged.
func TestBinaryBearerTokenFileReloaded(t *testing.T) {
	bin := buildBinary(t)
	v := startVendor(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("b3arer-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, "-batch.max-age", "10ms", "-dest", "name=v,endpoint=http://"+v.addr+",bearer-token-file="+tokenFile)
	spans := func() int { n, _ := v.seen("authorization"); return n }
	reloads := func() int { return strings.Count(g.stderr.String(), "destinations reloaded") }
	postTwoSpans(t, g.http, 1)
	testkit.WaitFor(t, "2 spans", func() bool { return spans() == 2 })
	// The same token: the destination keeps running.
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return reloads() == 1 })
	if err := os.WriteFile(tokenFile, []byte("b3arer-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the second reload", func() bool { return reloads() == 2 })
	postTwoSpans(t, g.http, 2)
	testkit.WaitFor(t, "4 spans", func() bool { return spans() == 4 })

	// Emptied, then removed: each reload fails, naming the file; the destination keeps the
	// token it has.
	failures := func() int { return strings.Count(g.stderr.String(), "cannot reload the destinations") }
	for i, unreadable := range []func() error{
		func() error { return os.WriteFile(tokenFile, nil, 0o600) },
		func() error { return os.Remove(tokenFile) },
	} {
		if err := unreadable(); err != nil {
			t.Fatal(err)
		}
		g.cmd.Process.Signal(syscall.SIGHUP)
		testkit.WaitFor(t, "the failed reload", func() bool { return failures() == i+1 })
		postTwoSpans(t, g.http, uint64(3+i))
		testkit.WaitFor(t, "2 more spans", func() bool { return spans() == 6+2*i })
	}
	if _, got := v.seen("authorization"); len(got) != 2 || got[0] != "Bearer b3arer-one" || got[1] != "Bearer b3arer-two" {
		t.Errorf("authorization: %q, want Bearer b3arer-one, then Bearer b3arer-two", got)
	}
	g.terminate(t)
	l := g.stderr.String()
	if got := reloadsChanged(l); fmt.Sprint(got) != "[[] [v]]" {
		t.Errorf("reloads changed %v, want a reload that changed nothing, then one naming v changed:\n%s", got, l)
	}
	for _, line := range strings.Split(l, "\n") {
		if strings.Contains(line, "cannot reload the destinations") && !strings.Contains(line, tokenFile) {
			t.Errorf("a failed reload does not name the token file: %s", line)
		}
	}
	if strings.Contains(l, "b3arer") {
		t.Errorf("a token is logged:\n%s", l)
	}
}

// A header written with the wrong separator (key=value instead of key:value), in a -dest flag,
// a -dest.file line or a config file, stops the start with an error naming the key, and the
// value, which holds the secret, appears nowhere in the output.
func TestBinaryMalformedHeaderNotEchoed(t *testing.T) {
	bin := buildBinary(t)
	const secret = "s3cret-api-key-value"
	dir := t.TempDir()
	dests := filepath.Join(dir, "dests")
	if err := os.WriteFile(dests, []byte("name=b,endpoint=127.0.0.1:1,header=x-api-key="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "otlpgate.yaml")
	if err := os.WriteFile(config, []byte("dest:\n  - name=c,endpoint=127.0.0.1:1,header=x-api-key="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-dest", "name=a,endpoint=127.0.0.1:1,header=x-api-key=" + secret},
		{"-dest.file", dests},
		{"-config", config},
		{"-dest", "name=a,endpoint=127.0.0.1:1,header=x-api-key=" + secret, "-check"},
	} {
		out, err := runBinary(t, bin, args...)
		if code := exitCode(err); code == 0 || !strings.Contains(string(out), "header") || !strings.Contains(string(out), "bad value (not shown: it may hold a secret)") || strings.Contains(string(out), secret) {
			t.Errorf("%v: exit %d; want a refusal naming the header key and never the value:\n%s", args[:1], code, out)
		}
	}
}

// A secret rotated on disk, as a Kubernetes Secret volume is, reaches the upstream without a
// signal: the files a reload reads (a -dest header-file, a ${file:PATH} of a -dest.file line)
// are read every -secrets.poll-interval, and a change reloads the destinations that use them.
// Neither value is logged; the log names the files.
func TestBinarySecretRotatedWithoutSignal(t *testing.T) {
	bin := buildBinary(t)
	flagVendor, fileVendor := startVendor(t), startVendor(t)
	dir := t.TempDir()
	keyFile, tokenFile, destFile := filepath.Join(dir, "key"), filepath.Join(dir, "token"), filepath.Join(dir, "dests")
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(keyFile, "k3y-one\n")
	write(tokenFile, "t0k-one\n")
	write(destFile, "name=f,endpoint=http://"+fileVendor.addr+",header=x-vendor-token:${file:"+tokenFile+"}\n")
	g := startGateway(t, bin, "-batch.max-age", "10ms", "-secrets.poll-interval", "50ms",
		"-dest", "name=v,endpoint=http://"+flagVendor.addr+",header-file=x-api-key:"+keyFile, "-dest.file", destFile)
	spans := func(v *vendor, h string) func() bool {
		return func() bool { n, _ := v.seen(h); return n == 4 }
	}
	postTwoSpans(t, g.http, 1)
	testkit.WaitFor(t, "2 spans at each", func() bool {
		a, _ := flagVendor.seen("x-api-key")
		b, _ := fileVendor.seen("x-vendor-token")
		return a == 2 && b == 2
	})
	write(keyFile, "k3y-two\n")
	write(tokenFile, "t0k-two\n")
	// The two files change one after the other, so a poll may fall between
	// the writes: one reload naming both, or one naming v and then one naming f.
	testkit.WaitFor(t, "reloads naming f and v changed", func() bool {
		l := g.stderr.String()
		named := reloadedChanged(l)
		return strings.Contains(l, "a file a reload reads changed") && named["f"] && named["v"]
	})
	postTwoSpans(t, g.http, 2)
	testkit.WaitFor(t, "4 spans at the flag's vendor", spans(flagVendor, "x-api-key"))
	testkit.WaitFor(t, "4 spans at the file's vendor", spans(fileVendor, "x-vendor-token"))
	if _, got := flagVendor.seen("x-api-key"); !slices.Equal(got, []string{"k3y-one", "k3y-two"}) {
		t.Errorf("x-api-key: %q, want k3y-one then k3y-two", got)
	}
	if _, got := fileVendor.seen("x-vendor-token"); !slices.Equal(got, []string{"t0k-one", "t0k-two"}) {
		t.Errorf("x-vendor-token: %q, want t0k-one then t0k-two", got)
	}
	g.terminate(t)
	if l := g.stderr.String(); strings.Contains(l, "k3y-") || strings.Contains(l, "t0k-") {
		t.Errorf("a secret is logged:\n%s", l)
	}
}

var changedAttr = regexp.MustCompile(`changed=(?:"\[([^\]"]*)\]"|\[([^\] ]*)\])`)

// reloadsChanged returns, for each "destinations reloaded" line of the log in order, the
// destinations it names as changed.
func reloadsChanged(log string) [][]string {
	var reloads [][]string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "destinations reloaded") {
			continue
		}
		changed := []string{}
		for _, m := range changedAttr.FindAllStringSubmatch(line, -1) {
			changed = append(changed, strings.Fields(m[1]+" "+m[2])...)
		}
		reloads = append(reloads, changed)
	}
	return reloads
}

// reloadedChanged returns every destination a "destinations reloaded" line
// in the log names as changed.
func reloadedChanged(log string) map[string]bool {
	named := map[string]bool{}
	for _, changed := range reloadsChanged(log) {
		for _, name := range changed {
			named[name] = true
		}
	}
	return named
}
