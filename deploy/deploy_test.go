// Package deploy holds the deployment examples (nginx, HAProxy, Envoy, systemd, Kubernetes, the
// Helm chart, Prometheus alerts, the Grafana dashboard, the Dockerfile at the root) and the tests
// that check them: each file parses with the tool that will read it (helm and promtool
// included), every otlpgate flag it uses exists and otlpgate -check accepts its command lines,
// and the chart's and the manifests' command lines carry a span to a Collector stand-in. The
// balancer configs are also run for real by internal/l7lb.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// needTool finds a tool's binary. Outside CI a missing tool skips the test with the reason; in CI
// (CI=true) it fails it, so that CI never passes by skipping.
func needTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; .ci/run installs it", name)
	}
	t.Skipf("%s is not installed (Debian: apt-get install -y nginx haproxy prometheus make); skipping", name)
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func TestNginxConfig(t *testing.T) {
	nginx := needTool(t, "nginx")
	conf, _ := filepath.Abs("nginx/nginx.conf")
	prefix := t.TempDir()
	out, err := exec.Command(nginx, "-t", "-p", prefix, "-e", "stderr", "-c", conf).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("test is successful")) {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

func TestHAProxyConfig(t *testing.T) {
	haproxy := needTool(t, "haproxy")
	out, err := exec.Command(haproxy, "-c", "-f", "haproxy/haproxy.cfg").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Configuration file is valid")) {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed; skipping the unit check")
	}
	unit, err := os.ReadFile("systemd/otlpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "RuntimeDirectory=otlpgate", "ExecReload=/bin/kill -HUP $MAINPID"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("unit lacks %q", want)
		}
	}
	// verify insists that ExecStart names an executable: point it at the binary built here.
	dir := t.TempDir()
	unit = bytes.ReplaceAll(unit, []byte("/usr/local/bin/otlpgate"), []byte(otlpgateBinary(t)))
	p := filepath.Join(dir, "otlpgate.service")
	if err := os.WriteFile(p, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", p).CombinedOutput()
	// Outside a booted systemd, verify also complains about units it cannot load (the target
	// of WantedBy, sockets of the host); only lines about our unit count.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "otlpgate.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil && !strings.Contains(string(out), "otlpgate.service") {
		t.Logf("systemd-analyze verify exited with %v about other units:\n%s", err, out)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
	binDir    string
)

// otlpgateBinary builds cmd/otlpgate once for the package's tests.
func otlpgateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "otlpgate-deploy-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "otlpgate")
		if runtime.GOOS == "windows" {
			binPath += ".exe"
		}
		buildOut, buildErr = exec.Command("go", "build", "-o", binPath, "../cmd/otlpgate").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// TestMain removes the binary built for the tests, and fails the run when a goroutine a test
// started (a child's waiter, a sink, a client connection) outlives it.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var flagRe = regexp.MustCompile(`(?m)(?:^|[\s"'\[,])-([a-z][a-z0-9]*(?:[.-][a-z0-9]+)+|[a-z]+)=`)

var (
	knownOnce  sync.Once
	knownFlags map[string]bool
	knownOut   []byte
)

// otlpgateFlags returns the flags otlpgate -help lists.
func otlpgateFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := otlpgateBinary(t)
	knownOnce.Do(func() {
		knownOut, _ = exec.Command(bin, "-help").CombinedOutput()
		knownFlags = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9.\-]+)`).FindAllStringSubmatch(string(knownOut), -1) {
			knownFlags[m[1]] = true
		}
	})
	if len(knownFlags) < 20 {
		t.Fatalf("could not read the flags from -help:\n%s", knownOut)
	}
	return knownFlags
}

// checkFlagsExist fails the test for every -flag= in text that otlpgate does not know, and
// returns how many flags it found.
func checkFlagsExist(t *testing.T, src, text string) int {
	t.Helper()
	known := otlpgateFlags(t)
	ms := flagRe.FindAllStringSubmatch(text, -1)
	for _, m := range ms {
		if !known[m[1]] {
			t.Errorf("%s passes -%s, which otlpgate does not know", src, m[1])
		}
	}
	return len(ms)
}

// TestFlagsExist checks that every flag the examples pass exists in otlpgate -help, so that a
// renamed flag cannot leave a broken example behind.
func TestFlagsExist(t *testing.T) {
	files := []string{"../Dockerfile", "systemd/otlpgate.service"}
	k8s, _ := filepath.Glob("kubernetes/*.yaml")
	files = append(files, k8s...)
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen += checkFlagsExist(t, f, string(raw))
	}
	if seen < 10 {
		t.Fatalf("found only %d flags in the examples: the pattern is broken", seen)
	}
}

// startOtlpgate starts the binary with args and env (added to this process's environment) and
// stops it with SIGTERM when the test ends. It returns the process's output and a channel
// closed at its exit.
func startOtlpgate(t *testing.T, args, env []string) (*testkit.LockedBuffer, <-chan struct{}) {
	t.Helper()
	log := &testkit.LockedBuffer{}
	cmd := exec.Command(otlpgateBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
			t.Errorf("otlpgate %q did not exit a minute after SIGTERM:\n%s", args, log.String())
		}
	})
	return log, exited
}
