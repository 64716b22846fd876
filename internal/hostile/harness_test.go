package hostile

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// binary is the otlpgate built for this run by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "otlpgate-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "otlpgate")
	if out, err := exec.Command("go", "build", "-o", binary, "../../cmd/otlpgate").CombinedOutput(); err != nil {
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

// anyPort is the listen address the harness gives otlpgate: the kernel chooses a free port at
// the bind and the harness reads it from the start log. A port chosen here, closed and handed
// to the child could be taken meanwhile by another test binary of `go test ./...`.
const anyPort = "127.0.0.1:0"

// gate is an otlpgate process under attack. Every intake listens on loopback (UDS in a
// temporary directory); the destination is a file, so that delivery never holds anything back.
type gate struct {
	GRPC, HTTP, Kafka, Admin, UDS string

	cmd    *exec.Cmd
	stderr *testkit.LockedBuffer
	exited chan struct{}
	err    error
}

// startGate starts otlpgate with every intake and the given extra flags (which override the
// defaults set here, since the flag package keeps the last value).
func startGate(t testing.TB, extra ...string) *gate {
	t.Helper()
	dir := t.TempDir()
	g := &gate{UDS: filepath.Join(dir, "oc.sock"), stderr: &testkit.LockedBuffer{}, exited: make(chan struct{})}
	args := []string{"-grpc.listen", anyPort, "-http.listen", anyPort, "-kafka.listen", anyPort,
		"-admin.listen", anyPort, "-uds.listen", g.UDS, "-file.path", filepath.Join(dir, "out.jsonl"),
		"-file.max-bytes", "16MiB", "-file.max-backups", "1"}
	g.cmd = exec.Command(binary, append(args, extra...)...)
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
	addrs := testkit.WaitAddrs(t, g.stderr.String, g.exited, listenlog.GRPC, listenlog.HTTP, listenlog.Kafka, listenlog.Admin)
	g.GRPC, g.HTTP, g.Kafka, g.Admin = addrs[0], addrs[1], addrs[2], addrs[3]
	g.waitReady(t)
	return g
}

func (g *gate) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			t.Fatalf("otlpgate exited at start: %v\n%s", g.err, g.stderr.Tail(4096))
		default:
		}
		resp, err := http.Get("http://" + g.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("otlpgate not ready within 30 s:\n%s", g.stderr.Tail(4096))
}

// alive fails the test if the process has exited.
func (g *gate) alive(t testing.TB) {
	t.Helper()
	select {
	case <-g.exited:
		t.Fatalf("otlpgate died: %v\n%s", g.err, g.stderr.Tail(8192))
	default:
	}
}

// status returns the named fields (in bytes for the Vm* sizes) of /proc/<pid>/status.
func (g *gate) status(t testing.TB, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("status %s: %q", field, l)
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		return n
	}
	t.Fatalf("no %s in /proc status", field)
	return 0
}

// PeakRSS is the process's high-water mark of resident memory (VmHWM).
func (g *gate) PeakRSS(t testing.TB) int64 { return g.status(t, "VmHWM") }

// metric returns the sum of the samples of the named metric on /metrics whose label set
// contains every one of labels (each `k="v"`), or -1 when there is none.
func (g *gate) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.Admin + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) || len(l) == len(name) || (l[len(name)] != ' ' && l[len(name)] != '{') {
			continue
		}
		ok := true
		for _, want := range labels {
			if !strings.Contains(l, want) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if !found {
		return -1
	}
	return sum
}

// witness is the well-behaved client: every period it sends one small OTLP/HTTP protobuf POST
// and one OTLP/gRPC v1 Export, and records every answer that was not a success.
type witness struct {
	period time.Duration
	stop   chan struct{}
	done   chan struct{}

	sent, served atomic.Int64
	mu           sync.Mutex
	refusals     []refusal
	longest      time.Duration // longest run of consecutive refusals, per intake
	firstBad     [2]time.Time  // start of the current refusal run, per intake (0 http, 1 grpc)
}

type refusal struct {
	at     time.Time
	intake string
	err    string
}

// watch starts the well-behaved client against g. Its requests time out after timeout (a
// refused-by-timeout request counts as a refusal). stop it with (*witness).end.
func watch(t testing.TB, g *gate, period, timeout time.Duration) *witness {
	t.Helper()
	w := &witness{period: period, stop: make(chan struct{}), done: make(chan struct{})}
	conn, err := grpc.NewClient(g.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	body, err := otlpgen.New(7).Spans(otlpgen.Shape{Spans: 4, Attrs: 2}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	req := otlpgen.New(8).Spans(otlpgen.Shape{Spans: 4, Attrs: 2})
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: false, MaxIdleConnsPerHost: 1}}
	tc := coltracev1.NewTraceServiceClient(conn)
	go func() {
		defer close(w.done)
		defer conn.Close()
		defer hc.CloseIdleConnections()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			w.sent.Add(2)
			// OTLP/HTTP protobuf.
			hreq, _ := http.NewRequest(http.MethodPost, "http://"+g.HTTP+"/v1/traces", bytes.NewReader(body))
			hreq.Header.Set("Content-Type", "application/x-protobuf")
			resp, err := hc.Do(hreq)
			switch {
			case err != nil:
				w.refuse(0, "http", err.Error())
			case resp.StatusCode != http.StatusOK:
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				w.refuse(0, "http", resp.Status)
			default:
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				w.serve(0)
			}
			// OTLP/gRPC.
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			_, err = tc.Export(ctx, req)
			cancel()
			if err != nil {
				w.refuse(1, "grpc", err.Error())
			} else {
				w.serve(1)
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *witness) refuse(i int, intake, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.refusals = append(w.refusals, refusal{now, intake, msg})
	if w.firstBad[i].IsZero() {
		w.firstBad[i] = now
	}
	w.longest = max(w.longest, now.Sub(w.firstBad[i]))
}

func (w *witness) serve(i int) {
	w.served.Add(1)
	w.mu.Lock()
	w.firstBad[i] = time.Time{}
	w.mu.Unlock()
}

// end stops the client and fails t unless it was served throughout: no run of refusals on one
// intake longer than window, and at least one success per intake after the attack began.
func (w *witness) end(t testing.TB, window time.Duration) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	// A run still open at the end counts to now.
	for i := range w.firstBad {
		if !w.firstBad[i].IsZero() {
			w.longest = max(w.longest, time.Since(w.firstBad[i]))
		}
	}
	if w.longest > window || w.served.Load() == 0 {
		n := min(len(w.refusals), 10)
		t.Errorf("well-behaved client not served throughout: %d of %d requests refused, longest refusal run %v (allowed %v); first refusals: %v",
			len(w.refusals), w.sent.Load(), w.longest, window, w.refusals[:n])
	}
}

// waitServed waits (boundedly) until the client has been served n more times than now.
func (w *witness) waitServed(t testing.TB, n int64, within time.Duration) {
	t.Helper()
	want := w.served.Load() + n
	deadline := time.Now().Add(within)
	for w.served.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("well-behaved client served %d times, want %d within %v", w.served.Load(), want, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
