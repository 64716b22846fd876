package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// runCLI runs the binary to its end, bounded, and returns what it printed and its exit status.
// A process still running at the bound (a server started where it should not have) is killed
// and fails the test.
func runCLI(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after 20s (killed):\n%s", args, errb.String())
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// otlpgate has no subcommands: a word that is not a flag is refused with the usage, exit 2,
// instead of starting a server the user did not ask for.
func TestBinaryRefusesArguments(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	// Listeners on ports the kernel picks and a socket and file of the test's own, so that a
	// binary that ignores the word starts (and is caught by runCLI's bound) instead of failing
	// on a busy port.
	listen := []string{"-grpc.listen", anyPort, "-http.listen", anyPort, "-admin.listen", anyPort,
		"-uds.listen", filepath.Join(dir, "oc.sock"), "-file.path", filepath.Join(dir, "out.jsonl")}
	for _, args := range [][]string{
		{"version"},
		{"validate"},
		{"-log.level", "debug", "run", "-check"}, // a flag after the word is not read either
	} {
		word := args[0]
		if strings.HasPrefix(word, "-") {
			word = args[2]
		}
		stdout, stderr, code := runCLI(t, bin, append(slices.Clone(listen), args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
		for _, want := range []string{`otlpgate: unexpected argument "` + word + `"`, "usage: otlpgate [flags]", "otlpgate -help lists the flags"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
		if stdout != "" || strings.Contains(stderr, "listening") {
			t.Errorf("%v: stdout %q; a listener started:\n%s", args, stdout, stderr)
		}
	}
}

// -version prints what the build set (the Makefile's and the Dockerfile's -ldflags from git),
// the start logs it and /metrics exports it as otlpgate_build_info.
func TestBinaryVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "otlpgate")
	ld := "-X main.version=v1.2.3-test -X main.commit=0123456789abcdef0123456789abcdef01234567"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stdout, stderr, code := runCLI(t, bin, "-version")
	want := "otlpgate v1.2.3-test (commit 0123456789abcdef0123456789abcdef01234567, " + runtime.Version() + ")\n"
	if code != 0 || stdout != want {
		t.Errorf("-version: exit %d, stdout %q, want %q\n%s", code, stdout, want, stderr)
	}

	g := startGateway(t, bin)
	if l := g.stderr.String(); !strings.Contains(l, `msg="otlpgate build" version=v1.2.3-test commit=0123456789abcdef0123456789abcdef01234567 go=`+runtime.Version()) {
		t.Errorf("the start does not log the build:\n%s", l)
	}
	if v := scrape(t, g.admin, "otlpgate_build_info", `version="v1.2.3-test"`, `commit="0123456789abcdef0123456789abcdef01234567"`,
		`goversion="`+runtime.Version()+`"`); v != 1 {
		t.Errorf("otlpgate_build_info = %v, want 1", v)
	}
	g.terminate(t)
}

// Without -ldflags (go install, go build), the version and the commit come from what the go
// command stamped into the binary.
func TestBuildFromStampedInfo(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "feedface"}, {Key: "vcs.modified", Value: "true"}}}
	f := func(v, c string, bi *debug.BuildInfo, ok bool, wantV, wantC string) {
		t.Helper()
		if b := buildFrom(v, c, bi, ok); b.version != wantV || b.commit != wantC || b.goVersion != runtime.Version() {
			t.Errorf("buildFrom(%q, %q) = %+v, want %s %s", v, c, b, wantV, wantC)
		}
	}
	f("v1.0.0", "abc", stamped, true, "v1.0.0", "abc") // -ldflags win
	f("", "", stamped, true, "v0.9.0", "feedface-dirty")
	f("", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)", "unknown")
	f("", "", nil, false, "unknown", "unknown")
}

// countingListener accepts and counts connections: an upstream that proves nothing dialled it.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), accepted
}

// -check reads the whole configuration, files included, and answers 0 with a summary or 2 with
// the error, without binding a port, dialling an upstream or creating anything on disk: every
// listen address of the good configuration is held by the test, so a -check that bound one
// would fail, and the upstreams count the connections they get.
func TestBinaryCheck(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cert, key := testkit.SelfSigned(t, dir)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up1, dialled1 := countingListener(t)
	up2, dialled2 := countingListener(t)
	destFile := filepath.Join(dir, "dests")
	if err := os.WriteFile(destFile, []byte("# the second tier\nname=b,endpoint="+up2+",tls=true,tls-ca="+cert+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var held []string // the addresses a -check must not bind: each is taken
	for range 4 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		held = append(held, ln.Addr().String())
	}
	spoolDir := filepath.Join(dir, "spool")
	sock := filepath.Join(dir, "oc.sock")
	filePath := filepath.Join(dir, "file", "otlp.jsonl")
	base := []string{"-grpc.listen", held[0], "-http.listen", held[1], "-admin.listen", held[2], "-kafka.listen", held[3],
		"-uds.listen", sock, "-file.path", filePath,
		"-grpc.tls.cert", cert, "-grpc.tls.key", key, "-http.tls.cert", cert, "-http.tls.key", key, "-auth.token-file", token}
	good := append(slices.Clone(base), "-dest", "name=a,endpoint="+up1+",bearer-token-file="+token, "-dest.file", destFile, "-spool.dir", spoolDir)

	stdout, stderr, code := runCLI(t, bin, append(good, "-check")...)
	want := "otlpgate: configuration OK: intakes grpc " + held[0] + ", http " + held[1] + ", kafka " + held[3] + ", uds " + sock +
		"; destinations a, b; spool " + spoolDir + "; ack accept\n"
	if code != 0 || stdout != want {
		t.Fatalf("good configuration: exit %d, stdout %q, want %q\nstderr: %s", code, stdout, want, stderr)
	}
	// Without a destination, the file destination is named, and its directory is not created.
	stdout, stderr, code = runCLI(t, bin, append(slices.Clone(base), "-check")...)
	if code != 0 || !strings.HasSuffix(stdout, "; destinations file "+filePath+"; spool off; ack accept\n") {
		t.Errorf("file destination: exit %d, stdout %q\nstderr: %s", code, stdout, stderr)
	}
	for _, p := range []string{spoolDir, filepath.Dir(filePath), sock} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("-check created %s (%v)", p, err)
		}
	}
	if n1, n2 := dialled1.Load(), dialled2.Load(); n1 != 0 || n2 != 0 {
		t.Errorf("-check dialled the upstreams: %d and %d connections", n1, n2)
	}

	badDestFile := filepath.Join(dir, "bad-dests")
	if err := os.WriteFile(badDestFile, []byte("name=c,endpoint="+up2+",frobnicate=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"bad flag value", []string{"-queue.max-bytes", "lots"}, `invalid value "lots" for flag -queue.max-bytes`},
		{"bad dest", []string{"-dest", "name=a,endpoint=" + up1 + ",frobnicate=1"}, "frobnicate"},
		{"bad dest.file", []string{"-dest.file", badDestFile}, "frobnicate"},
		{"missing dest.file", []string{"-dest.file", filepath.Join(dir, "nowhere")}, "-dest.file: open " + filepath.Join(dir, "nowhere")},
		{"missing intake TLS file", []string{"-grpc.tls.cert", missing}, "grpc: cannot load TLS key pair: open " + missing},
		{"missing client CA", []string{"-http.tls.client-ca", missing}, "http: cannot read client CA: open " + missing},
		{"missing token file", []string{"-auth.token-file", missing}, "grpc: cannot read token file: open " + missing},
		{"missing dest TLS file", []string{"-dest", "name=a,endpoint=" + up1 + ",tls=true,tls-ca=" + missing}, "-dest a: client: cannot read tls-ca: open " + missing},
		{"missing dest token file", []string{"-dest", "name=a,endpoint=" + up1 + ",bearer-token-file=" + missing}, "-dest a: client: bearer-token-file: cannot read token file: open " + missing},
		{"missing subscriptions", []string{"-kafka.subscriptions", missing}, "kafka: cannot read subscriptions: open " + missing},
		{"unknown group", []string{"-uds.group", "no-such-group-otlpgate"}, "no-such-group-otlpgate"},
		{"spool too small", []string{"-spool.dir", spoolDir, "-spool.max-bytes", "100MiB"},
			"-spool.max-bytes 100MiB is below two segments of -spool.segment-bytes 64MiB: raise -spool.max-bytes to 128MiB or more, or lower -spool.segment-bytes to 50MiB or less"},
		{"spool with -ack=upstream", []string{"-spool.dir", spoolDir, "-ack", "upstream"}, "-ack=upstream cannot be combined with -spool.dir"},
	} {
		stdout, stderr, code := runCLI(t, bin, append(append(slices.Clone(base), c.args...), "-check")...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "flag provided but not defined") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.name, code, stdout, stderr, c.want)
		}
	}
	if n1, n2 := dialled1.Load(), dialled2.Load(); n1 != 0 || n2 != 0 {
		t.Errorf("-check dialled the upstreams: %d and %d connections", n1, n2)
	}
}
