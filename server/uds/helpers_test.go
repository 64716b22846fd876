package uds

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

func TestMain(m *testing.M) {
	// gnet's worker pool (ants) starts its cleaner goroutines when the package initialises,
	// before any test, and gnetpool.go releases it then: they may still be ending when the
	// tests start, and belong to the dependency, not to a test.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// testEngine serves the sockets of the tests that start a server through start: gnet, or
// OTLPGATE_TEST_UDS_ENGINE (make test runs the package again with it set to net).
var testEngine = func() string {
	if e := os.Getenv("OTLPGATE_TEST_UDS_ENGINE"); e != "" {
		return e
	}
	return EngineGNet
}()

// testEpoch is the test clock's start, after the captures were made.
var testEpoch = time.Date(2026, 11, 21, 12, 10, 0, 0, time.UTC)

// socketPath returns a short socket path (sun_path is limited) in a fresh directory.
func socketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uds")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "oc.sock")
}

type harness struct {
	t     testing.TB
	s     *Server
	rec   *testkit.Recorder
	clock *testkit.Clock
	path  string
}

// start runs a server on a fresh socket with a fake clock; edit adjusts the config.
func start(t testing.TB, edit func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = socketPath(t)
	cfg.Engine = testEngine
	cfg.Loops = 2
	if edit != nil {
		edit(&cfg)
	}
	h := &harness{t: t, rec: &testkit.Recorder{}, clock: testkit.NewClock(testEpoch), path: cfg.Listen}
	s, err := New(cfg, h.rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.clock = h.clock
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() { h.shutdown() })
	return h
}

func (h *harness) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.s.Shutdown(ctx); err != nil {
		h.t.Fatalf("shutdown: %v", err)
	}
}

func (h *harness) dial() *net.UnixConn {
	h.t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: h.path, Net: "unix"})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// write sends data in writes of chunk bytes (0: one write).
func write(t testing.TB, c net.Conn, data []byte, chunk int) {
	t.Helper()
	if chunk <= 0 {
		chunk = len(data)
	}
	for off := 0; off < len(data); off += chunk {
		if _, err := c.Write(data[off:min(off+chunk, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
}

// replay sends data over a new connection, closes it and waits until the server has handled
// the close (every byte before it is then handled too).
func (h *harness) replay(data []byte, chunk int) {
	h.t.Helper()
	closed := h.s.closed.Load()
	c := h.dial()
	write(h.t, c, data, chunk)
	c.Close()
	testkit.WaitFor(h.t, "the server to handle the close", func() bool { return h.s.closed.Load() > closed })
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// render turns consumed payloads into stable, indented JSON: traces first, then metrics, each in
// the order they were consumed.
func render(t testing.TB, payloads []testkit.Received) string {
	t.Helper()
	var out bytes.Buffer
	sorted := append([]testkit.Received(nil), payloads...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Signal < sorted[j].Signal })
	for _, p := range sorted {
		var msg proto.Message
		switch p.Signal {
		case fastpath.Traces:
			m := &coltracev1.ExportTraceServiceRequest{}
			if err := m.UnmarshalVT(p.Body); err != nil {
				t.Fatal(err)
			}
			msg = m
		case fastpath.Metrics:
			m := &colmetricsv1.ExportMetricsServiceRequest{}
			if err := m.UnmarshalVT(p.Body); err != nil {
				t.Fatal(err)
			}
			msg = m
		}
		// proto.Unmarshal with the reflection-based runtime validates UTF-8 and wire types
		// independently of the vtprotobuf code.
		if err := proto.Unmarshal(p.Body, msg.ProtoReflect().Type().New().Interface()); err != nil {
			t.Fatalf("%s body rejected by the protobuf runtime: %v", p.Signal, err)
		}
		j, err := protojson.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		// protojson randomises white space on purpose and writes ids in base64: decode it,
		// turn ids into hex, and re-encode with sorted keys and fixed indentation.
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			t.Fatal(err)
		}
		hexIDs(t, tree)
		indented, err := json.MarshalIndent(tree, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "# %s items=%d\n%s\n", p.Signal, p.Items, indented)
	}
	return out.String()
}

// hexIDs rewrites the base64 of trace and span ids in a protojson tree as hex.
func hexIDs(t testing.TB, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatalf("%s %q: %v", k, s, err)
				}
				v[k] = hex.EncodeToString(b)
				continue
			}
			hexIDs(t, x)
		}
	case []any:
		for _, x := range v {
			hexIDs(t, x)
		}
	}
}

// counter reads a prometheus counter; tests compare values before and after.
func counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// intakeRefused reads otlpgate_intake_refused_total{intake, resource} from the default
// registry, as a scrape would; 0 before the first refusal.
func intakeRefused(t *testing.T, intake, resource string) float64 {
	t.Helper()
	return testkit.Counter(t, "otlpgate_intake_refused_total", "intake", intake, "resource", resource)
}
