package client

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// echoAuth refuses every export, quoting the credentials it got, as careless servers do.
type echoAuth struct {
	coltracev1.UnimplementedTraceServiceServer
}

func (echoAuth) Export(ctx context.Context, _ *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return nil, status.Errorf(codes.PermissionDenied, "tenant %q with %q may not write here", md.Get("x-tenant-key"), md.Get("authorization"))
}

// A destination remembers its latest failure, as the upstream said it, without the secrets it
// sends: a refused connection first, then an upstream's refusal that quotes the credentials.
func TestLastError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens yet: connection refused

	cfg := unaryConfig(t, addr, ProtocolV1, 1)
	cfg.Headers = map[string]string{"x-tenant-key": "tk-0123456789"}
	cfg.BearerTokenFile = t.TempDir() + "/token"
	writeFile(t, cfg.BearerTokenFile, "s3cr3t-token-value\n")
	cfg.RetryMaxElapsed = waitFor * 2
	d := startDest(t, cfg)
	if msg, at := d.LastError(); msg != "" || !at.IsZero() {
		t.Fatalf("a new destination has a last error: %q at %v", msg, at)
	}
	before := time.Now()
	f := newFeeder(t, d)
	f.sendSignal(fastpath.Traces, "b0", traceBody("b0", 1, 10))
	msg := waitLastError(t, d, "connection refused")
	if _, at := d.LastError(); at.Before(before) || at.After(time.Now()) {
		t.Errorf("last error at %v, want between %v and now", at, before)
	}
	t.Logf("unreachable: %s", msg)

	// Now an upstream listens there and refuses, quoting the credentials.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", addr, err)
	}
	srv := grpc.NewServer()
	coltracev1.RegisterTraceServiceServer(srv, echoAuth{})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Stop(); <-done }()
	msg = waitLastError(t, d, "PermissionDenied")
	t.Logf("refused: %s", msg)
	for _, secret := range []string{"tk-0123456789", "s3cr3t-token-value"} {
		if strings.Contains(msg, secret) {
			t.Errorf("the last error shows a secret %q: %s", secret, msg)
		}
	}
	if !strings.Contains(msg, "<redacted>") || !strings.Contains(msg, "may not write here") {
		t.Errorf("last error %q: want the upstream's words with the secrets redacted", msg)
	}
	if ok := f.waitAll(); ok[0] {
		t.Error("a refused batch was delivered")
	}
}

func waitLastError(t *testing.T, d *Dest, want string) string {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		msg, _ := d.LastError()
		if strings.Contains(msg, want) {
			return msg
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last error never said %q; it is %q", want, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRedactSecrets(t *testing.T) {
	cfg := Config{Endpoint: "https://user:pa55word@example.test:4318", Headers: map[string]string{"x-k": "ab", "x-l": "longer-value"}}
	secrets := secretsOf(cfg, []string{"Bearer tok-123"})
	f := func(in, want string) {
		t.Helper()
		if got := redactSecrets(in, secrets); got != want {
			t.Errorf("redactSecrets(%q) = %q, want %q", in, got, want)
		}
	}
	f("auth Bearer tok-123 refused", "auth <redacted> refused")
	f("token tok-123", "token <redacted>")
	f("header longer-value, ab", "header <redacted>, ab") // too short to redact without blanking words
	f("dial https://user:pa55word@example.test", "dial https://user:<redacted>@example.test")
	long := strings.Repeat("é", maxErrorMessage)
	if got := redactSecrets(long, nil); len(got) > maxErrorMessage+3 || !strings.HasSuffix(got, "...") || !strings.Contains(got[:len(got)-3], "é") {
		t.Errorf("a long message is not capped cleanly: %d bytes", len(got))
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
