package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// built is the binary the tests run, built once for the whole test binary: dozens of tests
// start it, no test writes to it, and each build links anew (seconds each, more on a loaded
// machine). TestBinaryVersion builds its own, with -ldflags.
var built struct {
	once sync.Once
	dir  string // removed by TestMain
	bin  string
	out  []byte
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "otlpgate-cmd-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "otlpgate")
		built.out, built.err = exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.bin
}

func TestHelpIsReadable(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "-help").CombinedOutput()
	if err != nil {
		t.Fatalf("-help: %v", err)
	}
	for _, want := range []string{"-grpc.listen", "(default \"127.0.0.1:4317\")", "-queue.max-bytes", "(default 256MiB)",
		"-batch.max-age", "-ack", "-dest", "-http.listen", "(default \"127.0.0.1:4318\")", "-http.max-request-bytes", "(default 64MiB)", "-auth.token-file", "-file.path", "-admin.listen", "-shutdown.timeout", "queue_full",
		"-spool.dir", "-spool.sync", "(default \"interval\")", "-spool.max-bytes", "(default 1GiB)", "otlpgate_spool_fsyncs_total", "-spool.full", "-spool.checkpoint-interval",
		"-resource.set", "-resource.delete", "-drop", "otlpgate_process_dropped_items_total", "-sample.traces", "otlpgate_process_sampled_out_spans_total", "-sample.hash-seed", "-sample.mode",
		"-intake.headers", "-intake.max-tenants", "(default 1000)", "otlpgate_tenant_refused_requests_total"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-help lacks %q", want)
		}
	}
	if out, err := exec.Command(bin, "-queue.max-bytes=lots").CombinedOutput(); err == nil || !strings.Contains(string(out), "bad size") {
		t.Errorf("bad size accepted: %v %s", err, out)
	}
}

// The binary with its defaults (ports chosen by the kernel, read from its log) takes an OTEP stream and writes the
// spans to its file; SIGTERM shuts it down cleanly with everything written.
func TestBinaryEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "otlp.jsonl")
	subs := filepath.Join(dir, "subs.yaml")
	os.WriteFile(subs, []byte("subscriptions:\n  - name: all\n    metrics: [\"*\"]\n    interval: 30s\n"), 0o644)
	args := []string{"-grpc.listen", anyPort, "-http.listen", anyPort, "-admin.listen", anyPort, "-file.path", path, "-batch.max-age", "10ms",
		"-kafka.listen", anyPort, "-kafka.subscriptions", subs, "-uds.listen", filepath.Join(dir, "oc.sock")}
	cmd := exec.Command(bin, args...)
	var stderr testkit.LockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() { <-exited }()
	grpcAddr, _, httpAddr, _ := waitListening(t, &stderr, exited, args)

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := otepv1.NewUnaryExporterClient(conn)
	req := &otepv1.TraceExportRequest{Id: 7, ResourceSpans: otlpgen.New(1).Spans(otlpgen.Shape{Spans: 3, Attrs: 2}).ResourceSpans}
	var resp *otepv1.ExportResponse
	for range 200 { // the process needs a moment to listen; bounded
		if resp, err = c.ExportTraces(ctx, req, grpc.WaitForReady(true)); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil || resp.Id != 7 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("%v, %v", resp, err)
	}
	// Two more spans over OTLP/HTTP, protobuf.
	body, _ := otlpgen.New(2).Spans(otlpgen.Shape{Spans: 2, Attrs: 2}).MarshalVT()
	hresp, err := http.Post("http://"+httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != 200 {
		t.Fatalf("OTLP/HTTP: %d", hresp.StatusCode)
	}
	// A real OpenCensus PHP capture through the unix socket.
	capture, err := os.ReadFile("../../server/uds/testdata/trace_minimal.bin")
	if err != nil {
		t.Fatal(err)
	}
	uc, err := net.Dial("unix", filepath.Join(dir, "oc.sock"))
	if err != nil {
		t.Fatal(err)
	}
	uc.Write(capture)
	uc.Close()

	cmd.Process.Signal(syscall.SIGHUP) // re-reads the Kafka subscriptions
	for range 400 {
		if strings.Contains(stderr.String(), "reloaded the Kafka subscriptions") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if exitErr != nil {
		t.Fatalf("exit: %v\n%s", exitErr, stderr.String())
	}
	logs := stderr.String()
	for _, want := range []string{"gomaxprocs=", "grpc intake listening", "http intake listening", "reloaded the Kafka subscriptions", "shutting down", "stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var all string
	for sc.Scan() {
		all += sc.Text() + "\n"
	}
	if n := strings.Count(all, `"name":"load-generator-span"`); n != 5 {
		t.Errorf("file has %d gRPC and HTTP spans, want 3+2", n)
	}
	if !strings.Contains(all, `"traceId":"00000000000000000000000000000001"`) {
		t.Errorf("trace id not hex-encoded: %.300s", all)
	}
	if !strings.Contains(all, `"stringValue":"php"`) || !strings.Contains(all, `"name":"main"`) {
		t.Errorf("the OpenCensus span did not arrive: %.300s", all)
	}
}
