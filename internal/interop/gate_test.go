package interop

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// otlpgateBin is the otlpgate built for this run by TestMain.
var otlpgateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "otlpgate-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	otlpgateBin = filepath.Join(dir, "otlpgate")
	if out, err := exec.Command("go", "build", "-o", otlpgateBin, "../../cmd/otlpgate").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// transports are the gRPC transports of otlpgate, the matrix's otlpgate dimension: the intake's
// -grpc.transport and a destination's transport= take the same names.
var transports = []string{"grpc-go", "otlpgate"}

// gate is a running otlpgate child: its gRPC intake and admin listener on loopback ports the
// kernel chose.
type gate struct {
	GRPC, Admin string

	cmd    *exec.Cmd
	stderr *testkit.LockedBuffer
	exited chan struct{}
	err    error
}

// startGate starts otlpgate with its gRPC intake and admin listener on 127.0.0.1 (the other
// intakes off), batches sealed within 10ms, and the extra flags, and waits until it is ready.
func startGate(t testing.TB, extra ...string) *gate {
	t.Helper()
	g := &gate{stderr: &testkit.LockedBuffer{}, exited: make(chan struct{})}
	// -file.path: a gate started without -dest writes into the test's directory, not the
	// package's.
	args := []string{"-grpc.listen", "127.0.0.1:0", "-admin.listen", "127.0.0.1:0", "-http.listen", "",
		"-uds.listen", "", "-batch.max-age", "10ms", "-file.path", filepath.Join(t.TempDir(), "otlp.jsonl")}
	g.cmd = exec.Command(otlpgateBin, append(args, extra...)...)
	g.cmd.Stderr = g.stderr
	g.cmd.Stdout = io.Discard
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		g.err = g.cmd.Wait()
		close(g.exited)
	}()
	t.Cleanup(func() {
		g.cmd.Process.Signal(syscall.SIGKILL)
		<-g.exited
		if t.Failed() {
			t.Logf("otlpgate stderr (last 4 KiB):\n%s", g.stderr.Tail(4096))
		}
	})
	addrs := testkit.WaitAddrs(t, g.stderr.String, g.exited, listenlog.GRPC, listenlog.Admin)
	g.GRPC, g.Admin = addrs[0], addrs[1]
	testkit.WaitFor(t, "otlpgate to be ready", func() bool {
		resp, err := http.Get("http://" + g.Admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// metric returns the sum of the samples of the named metric on the child's /metrics whose
// label set contains each of labels (each `k="v"`); 0 when there is none.
func (g *gate) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.Admin + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) || len(l) == len(name) || (l[len(name)] != ' ' && l[len(name)] != '{') {
			continue
		}
		ok := true
		for _, want := range labels {
			ok = ok && strings.Contains(l, want)
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}

// need skips the test, or fails it under CI=true (where .ci/run installs every peer), when a
// peer is missing; why says what is missing and how to install it.
func need(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; .ci/run installs every peer", why)
	}
	t.Skipf("%s: skipping", why)
}
