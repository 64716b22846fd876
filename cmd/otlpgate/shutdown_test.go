package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// gateway is an otlpgate process started for a test.
type gateway struct {
	cmd              *exec.Cmd
	stderr           *testkit.LockedBuffer
	grpcAddr, admin  string
	http, kafka      string // bound addresses; empty when the listener is off
	path             string
	exited           chan struct{}
	exitErr          error
	sigterm, stopped time.Time
}

// startGateway runs the binary with the file destination, its intakes on 127.0.0.1:0, the UDS
// intake in a temporary directory and the given extra flags (later flags win, so extra may
// move or turn off a listener). It returns once every listener that is on has been bound, with
// the bound addresses read from the process's log.
func startGateway(t *testing.T, bin string, extra ...string) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{stderr: &testkit.LockedBuffer{}, path: filepath.Join(dir, "otlp.jsonl"), exited: make(chan struct{})}
	args := append([]string{"-grpc.listen", anyPort, "-admin.listen", anyPort, "-file.path", g.path,
		"-uds.listen", filepath.Join(dir, "oc.sock"), "-kafka.listen", anyPort, "-http.listen", anyPort}, extra...)
	g.cmd = exec.Command(bin, args...)
	g.cmd.Stderr = g.stderr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		g.exitErr = g.cmd.Wait()
		g.stopped = time.Now()
		close(g.exited)
	}()
	t.Cleanup(func() {
		g.cmd.Process.Kill()
		<-g.exited
	})
	g.grpcAddr, g.admin, g.http, g.kafka = waitListening(t, g.stderr, g.exited, args)
	return g
}

// anyPort is the listen address the tests give otlpgate: the kernel chooses a free port at the
// bind and the test reads it from the log (waitListening). A port chosen by the test, closed
// and handed to the child could be taken meanwhile by another test binary of `go test ./...`.
const anyPort = "127.0.0.1:0"

// waitListening waits until the child started with args has bound each of its gRPC, admin,
// HTTP and Kafka listeners that args turn on, and returns their addresses (empty for one that
// is off).
func waitListening(t *testing.T, log *testkit.LockedBuffer, exited <-chan struct{}, args []string) (grpcAddr, admin, httpAddr, kafka string) {
	t.Helper()
	// The defaults of the binary: gRPC, HTTP and admin on, Kafka off.
	on := map[string]bool{listenlog.GRPC: true, listenlog.Admin: true, listenlog.HTTP: true}
	flags := map[string]string{"grpc.listen": listenlog.GRPC, "admin.listen": listenlog.Admin,
		"http.listen": listenlog.HTTP, "kafka.listen": listenlog.Kafka}
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		l, ok := flags[name]
		if !ok || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				continue
			}
			val = args[i+1]
		}
		on[l] = val != ""
	}
	var names []string
	for _, l := range []string{listenlog.GRPC, listenlog.Admin, listenlog.HTTP, listenlog.Kafka} {
		if on[l] {
			names = append(names, l)
		}
	}
	addrs := testkit.WaitAddrs(t, log.String, exited, names...)
	got := map[string]string{}
	for i, n := range names {
		got[n] = addrs[i]
	}
	return got[listenlog.GRPC], got[listenlog.Admin], got[listenlog.HTTP], got[listenlog.Kafka]
}

// terminate sends SIGTERM and waits (boundedly) for the process to exit.
func (g *gateway) terminate(t *testing.T) {
	t.Helper()
	g.sigterm = time.Now()
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after SIGTERM:\n%s", g.stderr.String())
	}
}

// errorLines returns the log lines at level ERROR.
func (g *gateway) errorLines() []string {
	var out []string
	for _, l := range strings.Split(g.stderr.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// openStream dials the gateway and opens an OTEP trace stream that sent one request and got its
// answer: the stream is established on the server and idle.
func openStream(t *testing.T, ctx context.Context, addr string) grpc.BidiStreamingClient[otepv1.TraceExportRequest, otepv1.ExportResponse] {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := otepv1.NewStreamExporterClient(conn).ExportTraces(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	req := &otepv1.TraceExportRequest{Id: 1, ResourceSpans: otlpgen.New(1).Spans(otlpgen.Shape{Spans: 2, Attrs: 1}).ResourceSpans}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil || resp.Id != 1 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("first answer: %v, %v", resp, err)
	}
	return st
}

// A gateway with an idle OTEP stream from an edge exits promptly on SIGTERM, with status 0 and
// no error logged, even with a long shutdown timeout: the idle stream is ended at once instead
// of holding the shutdown until its deadline.
func TestShutdownWithIdleStreamIsPrompt(t *testing.T) {
	bin := buildBinary(t)
	g := startGateway(t, bin, "-shutdown.timeout", "10s", "-batch.max-age", "10ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := openStream(t, ctx, g.grpcAddr)

	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v", g.exitErr)
	}
	took := g.stopped.Sub(g.sigterm)
	t.Logf("exited %v after SIGTERM", took)
	if took > 3*time.Second {
		t.Errorf("took %v to exit with an idle stream, want well under the 10s timeout", took)
	}
	if lines := g.errorLines(); len(lines) > 0 {
		t.Errorf("errors logged at shutdown:\n%s", strings.Join(lines, "\n"))
	}
	// The stream was ended by the server with OK, not cut.
	if _, err := st.Recv(); err == nil {
		t.Error("stream still open after the gateway exited")
	}
	if !strings.Contains(g.stderr.String(), "stopped") {
		t.Errorf("log lacks the final line:\n%s", g.stderr.String())
	}
}

// holdingUpstream is an OTEP stream upstream that answers Success to each request only once the
// test releases its answers (never, if the test does not).
func holdingUpstream(t *testing.T) *testkit.GRPCSink {
	u := testkit.StartGRPCSink(t, "")
	u.HoldAnswers()
	return u
}

// upstreamDest is the -dest flag of an OTEP stream destination to u.
func upstreamDest(u *testkit.GRPCSink) string {
	return "name=up,endpoint=" + u.Addr() + ",protocol=otep,mode=stream,insecure=true"
}

// With -ack=upstream, a stream whose request waits for the upstream at shutdown gets its answer
// before it ends, and meanwhile /readyz already fails. Nothing is lost: exit status 0.
func TestShutdownAnswersEdgeAndFailsReadiness(t *testing.T) {
	bin := buildBinary(t)
	u := holdingUpstream(t)
	// The batch is sealed only by the shutdown (-batch.max-age is an hour).
	g := startGateway(t, bin, "-shutdown.timeout", "2m", "-batch.max-age", "1h", "-ack", "upstream", "-dest", upstreamDest(u))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := openStreamNoWait(t, ctx, g.grpcAddr)
	req := &otepv1.TraceExportRequest{Id: 7, ResourceSpans: otlpgen.New(2).Spans(otlpgen.Shape{Spans: 2, Attrs: 1}).ResourceSpans}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	if code, _ := readyz(t, g.admin); code != http.StatusOK {
		t.Fatalf("/readyz = %d while serving, want 200", code)
	}
	// The stream connects and sends in the background: the signal must come after the request
	// was admitted, or a slow machine lets the listener close before the client ever connected.
	testkit.WaitFor(t, "the request to be admitted", func() bool {
		return scrape(t, g.admin, "otlpgate_fastpath_admitted_items_total", `signal="traces"`) >= 2
	})
	g.cmd.Process.Signal(syscall.SIGTERM)
	testkit.WaitFor(t, "the batch to reach the upstream during shutdown", func() bool { return len(u.Requests()) > 0 })
	if n, _ := u.SpanCount(); n != 2 || len(u.Requests()) != 1 {
		t.Fatalf("upstream got %d spans in %d requests, want 2 in 1", n, len(u.Requests()))
	}
	// The gateway now waits for the upstream's answer to answer the edge. With eager sealing the
	// batch may have left before the signal was handled, so readiness is polled (bounded).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := readyz(t, g.admin)
		if code == http.StatusServiceUnavailable && body == "not ready: shutting down\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q during shutdown, want 503", code, body)
		}
	}
	u.ReleaseAnswers()
	resp, err := st.Recv()
	if err != nil || resp.Id != 7 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("edge answer: %v, %v", resp, err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Errorf("stream end after the answer: %v, want a clean end", err)
	}
	select {
	case <-g.exited:
	case <-ctx.Done():
		t.Fatal("no exit")
	}
	if g.exitErr != nil {
		t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	if lines := g.errorLines(); len(lines) > 0 {
		t.Errorf("errors logged:\n%s", strings.Join(lines, "\n"))
	}
}

// When the destinations cannot deliver what was acknowledged before the deadline, the loss is
// logged once, with its count and reason, and the exit status is 3. What the upstream received
// and did not answer is said to be perhaps delivered, not lost.
func TestShutdownLossExitStatus(t *testing.T) {
	bin := buildBinary(t)
	u := holdingUpstream(t) // never answers
	g := startGateway(t, bin, "-shutdown.timeout", "2s", "-batch.max-age", "1h", "-dest", upstreamDest(u))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := openStreamNoWait(t, ctx, g.grpcAddr)
	req := &otepv1.TraceExportRequest{Id: 9, ResourceSpans: otlpgen.New(3).Spans(otlpgen.Shape{Spans: 3, Attrs: 1}).ResourceSpans}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || resp.Id != 9 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("answer: %v, %v", resp, err) // -ack=accept: acknowledged once admitted
	}
	g.terminate(t)
	var ee *exec.ExitError
	if !errors.As(g.exitErr, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3\n%s", g.exitErr, g.stderr.String())
	}
	lines := g.errorLines()
	if len(lines) != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", len(lines), g.stderr.String())
	}
	for _, want := range []string{`msg="data lost at shutdown"`, `destination \"up\": at the shutdown deadline 3 items (1 requests) sent without an answer, perhaps delivered`, "shutdown_pending: 1 requests, 3 items"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("loss line lacks %q:\n%s", want, lines[0])
		}
	}
}

// openStreamNoWait dials the gateway and opens an OTEP trace stream.
func openStreamNoWait(t *testing.T, ctx context.Context, addr string) grpc.BidiStreamingClient[otepv1.TraceExportRequest, otepv1.ExportResponse] {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := otepv1.NewStreamExporterClient(conn).ExportTraces(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readyz asks /readyz, retrying (boundedly) while the admin listener is not up yet.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	var err error
	for range 400 {
		var resp *http.Response
		if resp, err = http.Get("http://" + addr + "/readyz"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("/readyz: %v", err)
	return 0, ""
}
