package client

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
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

// Upstreams that quote the credentials they were sent, on every path whose log lines carry an
// upstream's message: a stream ended with a status (its requests sent again, or refused), a
// gRPC refusal, an HTTP refusal and partial successes. No line shows the bearer token or the
// header's value, not even in part: the token sits across byte 256 of the message, where the
// HTTP status and the partial success's message are cut for the log.
func TestUpstreamMessagesRedacted(t *testing.T) {
	const token, key = "s3cr3t-token-value", "k3y-0123456789"
	echo := strings.Repeat("x", 240) + " Bearer " + token + ", x-api-key " + key + ": not allowed"
	grpcDest := func(t *testing.T, cfg func(addr string) Config, script func(u *upstream)) Config {
		u := newUpstream(t)
		script(u)
		return cfg(u.addr)
	}
	httpDest := func(t *testing.T, answer func(ctx *fasthttp.RequestCtx)) Config {
		u := newHTTPUpstream(t, nil)
		u.answer = func(_ hit, ctx *fasthttp.RequestCtx) { answer(ctx) }
		return httpConfig(t, u, "concurrency=1")
	}
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name      string
		delivered bool
		lines     []string // the lines that must quote the upstream, redacted
		dest      func(t *testing.T) Config
	}{
		{"otep stream ended, sent again", true, []string{"stream ended"}, func(t *testing.T) Config {
			return grpcDest(t, func(addr string) Config { return streamConfig(t, addr, 1, 1) }, func(u *upstream) {
				var ended atomic.Bool
				u.onStream = func(s *srvStream, g received) error {
					if ended.CompareAndSwap(false, true) {
						return status.Error(codes.Unavailable, echo)
					}
					s.ack(g.id, otepv1.ResultCode_Success)
					return nil
				}
			})
		}},
		{"otep stream ended, refused", false, []string{"stream ended", "upstream rejected a batch"}, func(t *testing.T) Config {
			return grpcDest(t, func(addr string) Config { return streamConfig(t, addr, 1, 1) }, func(u *upstream) {
				u.onStream = func(*srvStream, received) error { return status.Error(codes.PermissionDenied, echo) }
			})
		}},
		{"v1 refused", false, []string{"upstream rejected a batch"}, func(t *testing.T) Config {
			return grpcDest(t, func(addr string) Config { return unaryConfig(t, addr, ProtocolV1, 1) }, func(u *upstream) {
				u.onUnary = func(received) (otepv1.ResultCode, error) { return 0, status.Error(codes.PermissionDenied, echo) }
			})
		}},
		{"v1 partial success", true, []string{"upstream rejected part of a batch"}, func(t *testing.T) Config {
			return grpcDest(t, func(addr string) Config { return unaryConfig(t, addr, ProtocolV1, 1) }, func(u *upstream) {
				u.v1Rejected, u.v1Message = 1, echo
			})
		}},
		{"http refused", false, []string{"upstream rejected a batch"}, func(t *testing.T) Config {
			body := marshal(status.New(codes.PermissionDenied, echo).Proto())
			return httpDest(t, func(ctx *fasthttp.RequestCtx) {
				ctx.SetStatusCode(http.StatusForbidden)
				ctx.SetContentType("application/x-protobuf")
				ctx.SetBody(body)
			})
		}},
		{"http partial success", true, []string{"upstream rejected part of a batch"}, func(t *testing.T) Config {
			body := marshal(&coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
				RejectedSpans: 1, ErrorMessage: echo,
			}})
			return httpDest(t, func(ctx *fasthttp.RequestCtx) {
				ctx.SetContentType("application/x-protobuf")
				ctx.SetBody(body)
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.dest(t)
			cfg.Headers = map[string]string{"x-api-key": key}
			cfg.BearerTokenFile = t.TempDir() + "/token"
			writeFile(t, cfg.BearerTokenFile, token+"\n")
			d, logs := startDestLogged(t, cfg)
			f := newFeeder(t, d)
			f.send(0, 3, 1, 10)
			for i, ok := range f.waitAll() {
				if ok != c.delivered {
					t.Errorf("b%d delivered: %v, want %v", i, ok, c.delivered)
				}
			}
			for _, line := range c.lines {
				// A stream's end is logged after its requests were sent again: it may come last.
				testkit.WaitFor(t, "the line "+line, func() bool { return strings.Contains(logs.String(), `msg="`+line+`"`) })
			}
			out := logs.String()
			for _, l := range strings.Split(out, "\n") {
				for _, line := range c.lines {
					if strings.Contains(l, `msg="`+line+`"`) && !strings.Contains(l, "xxx <redacted>") {
						t.Errorf("line without the upstream's message, redacted: %s", l)
					}
				}
			}
			// Not even a part: the first half of each secret.
			for _, secret := range []string{token, key} {
				if half := secret[:len(secret)/2]; strings.Contains(out, half) {
					t.Errorf("the log shows %q of the secret %q:\n%s", half, secret, out)
				}
			}
			if msg, _ := d.LastError(); strings.Contains(msg, token[:len(token)/2]) || strings.Contains(msg, key[:len(key)/2]) {
				t.Errorf("the last error shows a secret: %s", msg)
			}
		})
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
