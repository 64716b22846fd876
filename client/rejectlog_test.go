package client

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// An upstream that refuses every request, on each gRPC path: the refusals are dropped as
// rejected, and the log says so with the upstream's own message, its token redacted, in lines
// whose counts add up to at most what was refused (at most a line a second).
func TestRejectionsLogged(t *testing.T) {
	const n = 6
	refusal := status.Error(codes.InvalidArgument, "cannot decode the request (token s3cr3t-token)")
	for _, c := range []struct {
		name, message string
		cfg           func(addr string) Config
		refuse        func(u *upstream)
	}{
		{"v1", "InvalidArgument: cannot decode the request (token <redacted>)",
			func(addr string) Config { return unaryConfig(t, addr, ProtocolV1, 2) },
			func(u *upstream) {
				u.onUnary = func(received) (otepv1.ResultCode, error) { return 0, refusal }
			}},
		{"otep unary", "client: the upstream answered FailedNoneRetryable",
			func(addr string) Config { return unaryConfig(t, addr, ProtocolOTEP, 2) },
			func(u *upstream) {
				u.onUnary = func(received) (otepv1.ResultCode, error) {
					return otepv1.ResultCode_FailedNoneRetryable, nil
				}
			}},
		{"otep stream end", "InvalidArgument: cannot decode the request (token <redacted>)",
			func(addr string) Config { return streamConfig(t, addr, 1, 1) },
			func(u *upstream) { u.onStream = func(*srvStream, received) error { return refusal } }},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t)
			c.refuse(u)
			cfg := c.cfg(u.addr)
			cfg.Headers = map[string]string{"authorization": "Bearer s3cr3t-token"}
			d, logs := startDestLogged(t, cfg)
			f := newFeeder(t, d)
			f.send(0, n, 1, 10)
			for i, ok := range f.waitAll() {
				if ok {
					t.Errorf("b%d delivered", i)
				}
			}
			if got := drops(d); len(got) != 1 || got[DropRejected] != n {
				t.Errorf("dropped %v, want rejected: %d", got, n)
			}
			var lines []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `msg="upstream rejected a batch"`) {
					lines = append(lines, l)
				}
			}
			if len(lines) == 0 {
				t.Fatalf("no rejection line:\n%s", logs.String())
			}
			logged := 0
			for _, l := range lines {
				if !strings.Contains(l, "message="+strconv.Quote(c.message)) {
					t.Errorf("line without the upstream's message %q: %s", c.message, l)
				}
				m := regexp.MustCompile(` requests=(\d+) items=(\d+)`).FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("line without its counts: %s", l)
				}
				r, _ := strconv.Atoi(m[1])
				logged += r
			}
			if logged < len(lines) || logged > n {
				t.Errorf("%d lines count %d refusals, want at most %d", len(lines), logged, n)
			}
		})
	}
}
