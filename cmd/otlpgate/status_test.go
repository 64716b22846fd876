package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// statusDoc is the part of /status.json the test reads.
type statusDoc struct {
	Destinations []struct {
		Name        string     `json:"name"`
		State       string     `json:"state"`
		LastError   string     `json:"last_error"`
		LastErrorAt *time.Time `json:"last_error_at"`
		LastAck     *time.Time `json:"last_ack"`
	} `json:"destinations"`
	Spool *struct {
		OldestAge float64 `json:"oldest_unfinished_age_seconds"`
	} `json:"spool"`
}

func fetchStatus(t *testing.T, admin string) statusDoc {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// countingSink is a v1 trace upstream that counts the spans it accepts.
type countingSink struct {
	coltracev1.UnimplementedTraceServiceServer
	spans atomic.Int64
}

func (s *countingSink) Export(_ context.Context, r *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	for _, rs := range r.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans.Add(int64(len(ss.Spans)))
		}
	}
	return &coltracev1.ExportTraceServiceResponse{}, nil
}

// An operator reading /status.json during an outage sees what the upstream's failure is (the
// destination's last error, with when) and how far behind the spool is: the age of the oldest
// unfinished record grows while the upstream is away, and falls to 0 once it is back and the
// backlog is delivered.
func TestStatusShowsLastErrorAndSpoolAge(t *testing.T) {
	bin := buildBinary(t)
	// Nobody listens yet: connection refused. The upstream comes up later on this address,
	// which leaves a window in which another process may take the port: inherent to an
	// upstream that comes back.
	up := testkit.FreeAddr(t)
	g := startGateway(t, bin, "-http.listen", "", "-kafka.listen", "", "-spool.dir", filepath.Join(t.TempDir(), "spool"), "-status.interval", "200ms",
		"-batch.max-age", "20ms",
		"-dest", "name=archive,endpoint="+up+",protocol=v1,mode=unary,retry-initial=50ms,retry-max=200ms")
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := coltracev1.NewTraceServiceClient(conn)
	gen := otlpgen.New(7)
	const requests, spans = 5, 10
	for range requests {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := tc.Export(ctx, gen.Spans(otlpgen.Shape{Spans: spans, Attrs: 2}), grpc.WaitForReady(true))
		cancel()
		if err != nil {
			t.Fatalf("export: %v\n%s", err, g.stderr.String())
		}
	}

	var st statusDoc
	deadline := time.Now().Add(30 * time.Second)
	var firstAge float64
	for {
		st = fetchStatus(t, g.admin)
		if st.Spool != nil && len(st.Destinations) == 1 && strings.Contains(st.Destinations[0].LastError, "connection refused") {
			if firstAge == 0 && st.Spool.OldestAge > 0 {
				firstAge = st.Spool.OldestAge
			}
			if firstAge > 0 && st.Spool.OldestAge >= firstAge+1 {
				break // it grows while the upstream is away
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status never showed the outage (first age %v): %+v\n%s", firstAge, st, g.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	d := st.Destinations[0]
	if d.Name != "archive" || d.LastErrorAt == nil || time.Since(*d.LastErrorAt) > time.Minute {
		t.Errorf("destination %+v: want archive, its last error dated within the last minute", d)
	}
	t.Logf("during the outage: last error %q, spool age %v s", d.LastError, st.Spool.OldestAge)

	// The upstream comes back on that address: the backlog drains and the age falls to 0.
	ln, err := net.Listen("tcp", up)
	if err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{}
	srv := grpc.NewServer()
	coltracev1.RegisterTraceServiceServer(srv, sink)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Stop(); <-done }()
	deadline = time.Now().Add(30 * time.Second)
	for {
		st = fetchStatus(t, g.admin)
		if sink.spans.Load() == requests*spans && st.Spool != nil && st.Spool.OldestAge == 0 &&
			len(st.Destinations) == 1 && st.Destinations[0].LastAck != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backlog never drained: %d of %d spans delivered, status %+v", sink.spans.Load(), requests*spans, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
