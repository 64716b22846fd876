package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// With -ack=upstream and the only upstream down (it closes every connection it accepts), a
// client hears that the upstream is unavailable, over OTLP/HTTP and gRPC alike: not that
// otlpgate is overloaded, which would send its operator after a queue that is nearly empty.
func TestBinaryAckUpstreamDownSaysUpstream(t *testing.T) {
	bin := buildBinary(t)
	up, _ := countingListener(t)
	g := startGateway(t, bin, "-ack", "upstream",
		"-dest", "name=down,endpoint="+up+",retry-initial=10ms,retry-max=50ms,retry-max-elapsed=300ms")
	body, err := otlpgen.New(1).Spans(otlpgen.Shape{Spans: 2, Attrs: 2}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}

	resp, err := http.Post("http://"+g.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	const want = "upstream unavailable: a destination could not deliver the request (-ack=upstream): retry after the given delay"
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(answer), want) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("OTLP/HTTP: %d %q (Retry-After %q), want 503 %q", resp.StatusCode, answer, resp.Header.Get("Retry-After"), want)
	}

	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &coltracev1.ExportTraceServiceRequest{}
	if err := req.UnmarshalVT(body); err != nil {
		t.Fatal(err)
	}
	_, err = coltracev1.NewTraceServiceClient(conn).Export(ctx, req, grpc.WaitForReady(true))
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != want {
		t.Errorf("gRPC: %v, want UNAVAILABLE %q", err, want)
	}
	g.terminate(t)
}

// SIGHUP to an otlpgate without the Kafka intake does not say that it reloaded Kafka
// subscriptions it does not have: with -dest.file it says what it reloaded, the destinations,
// and nothing else; with nothing SIGHUP reloads, it says so.
func TestBinarySighupWithoutKafka(t *testing.T) {
	bin := buildBinary(t)
	up, _ := countingListener(t)
	destFile := filepath.Join(t.TempDir(), "dests")
	if err := os.WriteFile(destFile, []byte("name=a,endpoint="+up+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		line string // logged by the reload
	}{
		{[]string{"-dest.file", destFile, "-dest.file.poll-interval", "0"}, "destinations reloaded"},
		{nil, "nothing to reload: no -config, -dest.file, header-file or bearer-token-file, no balanced destination (resolver=), no -auth.tenants-file and no Kafka intake"},
	} {
		g := startGateway(t, bin, append([]string{"-kafka.listen", ""}, c.args...)...)
		g.cmd.Process.Signal(syscall.SIGHUP)
		testkit.WaitFor(t, "the reload's log line", func() bool { return strings.Contains(g.stderr.String(), c.line) })
		g.terminate(t) // the reload ran to its end before the loop took SIGTERM
		if l := g.stderr.String(); strings.Contains(l, "Kafka subscriptions") {
			t.Errorf("%v: a SIGHUP without Kafka logs about its subscriptions:\n%s", c.args, l)
		}
	}
}

// The README's `make run` paragraph names every listener otlpgate opens by default, the
// OpenCensus socket among them: one a user does not know of is one they cannot secure.
func TestReadmeNamesDefaultListeners(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, _ := strings.Cut(string(readme), "`make run` listens on")
	para, _, _ = strings.Cut(para, "\n\n")
	cfg := defaultConfig()
	for flag, addr := range map[string]string{"-grpc.listen": cfg.grpc.Listen, "-http.listen": cfg.http.Listen,
		"-admin.listen": cfg.admin.Listen, "-uds.listen": cfg.uds.Listen, "-kafka.listen": cfg.kafka.Listen, "-pprof.listen": cfg.pprof.Listen} {
		if addr != "" && !strings.Contains(para, "`"+addr+"`") {
			t.Errorf("README's make run paragraph does not name %s's default %s", flag, addr)
		}
	}
}
