package main

import (
	"context"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/testkit"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// The binary with -grpc.transport=otlpgate: the OpenTelemetry Go SDK's gRPC trace exporter,
// gzip-compressed, delivers its spans into the file destination exactly; an OTEP unary call is
// answered Success, an OTEP stream answers each of its requests by id and delivers their spans
// (the stream left open: SIGTERM ends it after its answers, OK); SIGTERM ends the process
// cleanly with the exporter's connection still open (the transport's two GOAWAYs).
func TestBinaryOwnGRPCTransport(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "otlp.jsonl")
	args := []string{"-grpc.listen", anyPort, "-http.listen", anyPort, "-admin.listen", anyPort, "-file.path", path,
		"-batch.max-age", "10ms", "-uds.listen", "", "-grpc.transport=otlpgate"}
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
	grpcAddr, _, _, _ := waitListening(t, &stderr, exited, args)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithCompressor("gzip"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "own-transport"))))
	var ids []string
	for i := range 3 {
		_, span := tp.Tracer("t").Start(ctx, "op-"+string(rune('a'+i)))
		span.End()
		ids = append(ids, span.SpanContext().SpanID().String())
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if resp, err := otepv1.NewUnaryExporterClient(conn).ExportTraces(ctx, &otepv1.TraceExportRequest{Id: 1}); err != nil || resp.Id != 1 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("OTEP unary call: %v, %v", resp, err)
	}
	stream, err := otepv1.NewStreamExporterClient(conn).ExportTraces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(7); id <= 9; id++ {
		sid := [8]byte{7: byte(id)}
		err := stream.Send(&otepv1.TraceExportRequest{Id: id, ResourceSpans: []*tracev1.ResourceSpans{{
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{TraceId: append(sid[:], sid[:]...), SpanId: sid[:], Name: "stream"}}}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, hex.EncodeToString(sid[:]))
	}
	for id := uint64(7); id <= 9; id++ {
		if resp, err := stream.Recv(); err != nil || resp.Id != id || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("OTEP stream, request %d: %v, %v", id, resp, err)
		}
	}
	streamEnd := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		streamEnd <- err
	}()

	// SIGTERM while the exporter's connection is open.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM:\n%s", stderr.String())
	}
	if exitErr != nil {
		t.Fatalf("exit: %v\n%s", exitErr, stderr.String())
	}
	if err := <-streamEnd; err != io.EOF {
		t.Errorf("OTEP stream at shutdown: %v, want its clean end", err)
	}
	tp.Shutdown(context.Background())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := string(b)
	for _, id := range ids {
		if n := strings.Count(all, `"spanId":"`+id+`"`); n != 1 {
			t.Errorf("span %s in the file %d times, want once", id, n)
		}
	}
	if n := strings.Count(all, `"spanId":`); n != len(ids) {
		t.Errorf("%d spans in the file, want %d", n, len(ids))
	}
	if !strings.Contains(all, `"stringValue":"own-transport"`) {
		t.Errorf("resource lost: %.300s", all)
	}
	if strings.Contains(stderr.String(), "cut") {
		t.Errorf("the shutdown cut calls:\n%s", stderr.String())
	}
}
