package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// gateway is an otlpgate process started for a test.
type gateway struct {
	cmd              *exec.Cmd
	stderr           *lockedBuffer
	grpcAddr, admin  string
	path             string
	exited           chan struct{}
	exitErr          error
	sigterm, stopped time.Time
}

// startGateway runs the binary with the file destination, its intakes on free loopback ports,
// the UDS intake in a temporary directory and the given extra flags.
func startGateway(t *testing.T, bin string, extra ...string) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{stderr: &lockedBuffer{}, grpcAddr: freePort(t), admin: freePort(t),
		path: filepath.Join(dir, "otlp.jsonl"), exited: make(chan struct{})}
	args := append([]string{"-grpc.listen", g.grpcAddr, "-admin.listen", g.admin, "-file.path", g.path,
		"-uds.listen", filepath.Join(dir, "oc.sock"), "-kafka.listen", freePort(t)}, extra...)
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
	return g
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
