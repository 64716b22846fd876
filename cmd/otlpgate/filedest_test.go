package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// fileDestStatus is a destination's entry in /status.json as far as these tests read it.
type fileDestStatus struct {
	Name          string  `json:"name"`
	State         string  `json:"state"`
	LastError     string  `json:"last_error"`
	AckedItems    float64 `json:"acknowledged_items"`
	AckedRequests float64 `json:"acknowledged_requests"`
}

func fileDestinations(t *testing.T, admin string) map[string]fileDestStatus {
	t.Helper()
	var doc struct {
		Destinations []fileDestStatus `json:"destinations"`
	}
	resp, err := http.Get("http://" + admin + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]fileDestStatus{}
	for _, d := range doc.Destinations {
		out[d.Name] = d
	}
	return out
}

// exportSpans sends n requests of spans spans each to the gateway's gRPC intake and returns the
// span ids it sent.
func exportSpans(t *testing.T, g *gateway, n, spans int) map[pcommon.SpanID]int {
	t.Helper()
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := coltracev1.NewTraceServiceClient(conn)
	gen := otlpgen.New(11)
	sent := map[pcommon.SpanID]int{}
	for range n {
		req := gen.Spans(otlpgen.Shape{Spans: spans, Attrs: 2})
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					sent[pcommon.SpanID(sp.SpanId)]++
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := tc.Export(ctx, req, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			t.Fatalf("export: %v\n%s", err, g.stderr.String())
		}
	}
	return sent
}

// fileSpans decodes the OTLP/JSON lines of path, as a Collector's file receiver would, and
// returns the span ids they hold.
func fileSpans(t *testing.T, path string) map[pcommon.SpanID]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[pcommon.SpanID]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var u ptrace.JSONUnmarshaler
	for sc.Scan() {
		td, err := u.UnmarshalTraces(sc.Bytes())
		if err != nil {
			t.Fatalf("line of %s does not decode: %v", path, err)
		}
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out[sp.SpanID()]++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSpans(a, b map[pcommon.SpanID]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A file destination beside a gRPC upstream (-dest name=archive,protocol=file,path=...): both
// receive every span exactly once, and /status.json lists the file as a destination, with what
// it wrote, as it lists the upstream.
// The same holds for a file destination given in a -dest.file line.
func TestFileDestinationBesideUpstream(t *testing.T) {
	bin := buildBinary(t)
	t.Run("dest", func(t *testing.T) { testFileBesideUpstream(t, bin, false) })
	t.Run("dest.file", func(t *testing.T) { testFileBesideUpstream(t, bin, true) })
}

func testFileBesideUpstream(t *testing.T, bin string, inFile bool) {
	sink, err := strictsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "archive", "spans.jsonl") // its directory is created
	archive := []string{"-dest", "name=archive,protocol=file,path=" + path}
	if inFile {
		destFile := filepath.Join(dir, "dests")
		if err := os.WriteFile(destFile, []byte("# the archive\nname=archive,protocol=file,path="+path+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		archive = []string{"-dest.file", destFile}
	}
	g := startGateway(t, bin, append([]string{"-status.interval", "100ms", "-batch.max-age", "20ms",
		"-dest", "name=upstream,endpoint=" + sink.Addr() + ",protocol=v1,mode=unary"}, archive...)...)
	const requests, spans = 4, 25
	sent := exportSpans(t, g, requests, spans)

	deadline := time.Now().Add(30 * time.Second)
	var ds map[string]fileDestStatus
	for {
		ds = fileDestinations(t, g.admin)
		if ds["archive"].AckedItems == requests*spans && ds["upstream"].AckedItems == requests*spans {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed both destinations with %d items: %+v\n%s", requests*spans, ds, g.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := ds["archive"]; a.State != "ok" || a.LastError != "" || a.AckedRequests < 1 {
		t.Errorf("archive in /status.json: %+v, want ok, no error, its batches counted", a)
	}
	if got := fileSpans(t, path); !sameSpans(got, sent) {
		t.Errorf("the file holds %d distinct spans, want the %d sent, each once", len(got), len(sent))
	}
	if got := sink.Spans(); !sameSpans(got, sent) || sink.Accepted(fastpath.Traces) == 0 {
		t.Errorf("the upstream got %d distinct spans, want the %d sent, each once", len(got), len(sent))
	}
	if _, ok := ds["file"]; ok || len(ds) != 2 {
		t.Errorf("destinations %+v: want upstream and archive only", ds)
	}
}

// Without -dest the file destination (-file.path) is the one destination, and the status page
// shows it like any other, with what it wrote.
func TestDefaultFileDestinationOnStatus(t *testing.T) {
	bin := buildBinary(t)
	g := startGateway(t, bin, "-status.interval", "100ms", "-batch.max-age", "20ms")
	const requests, spans = 3, 10
	sent := exportSpans(t, g, requests, spans)
	deadline := time.Now().Add(30 * time.Second)
	var ds map[string]fileDestStatus
	for {
		ds = fileDestinations(t, g.admin)
		if ds["file"].AckedItems == requests*spans {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the file destination with %d items: %+v\n%s", requests*spans, ds, g.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f := ds["file"]; f.State != "ok" || len(ds) != 1 {
		t.Errorf("destinations %+v: want the file alone, ok", ds)
	}
	if got := fileSpans(t, g.path); !sameSpans(got, sent) {
		t.Errorf("the file holds %d distinct spans, want the %d sent, each once", len(got), len(sent))
	}
}

// A file destination without a path, or whose directory cannot be created, is refused with an
// error that says so, by -check and by a start alike.
func TestFileDestinationRefusesBadPath(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker") // a file where the directory would have to be
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"-grpc.listen", anyPort, "-admin.listen", anyPort, "-http.listen", "", "-kafka.listen", "", "-uds.listen", ""}
	for _, c := range []struct {
		dest string
		want string
	}{
		{"name=archive,protocol=file", "path is required for protocol file"},
		{"name=archive,protocol=file,path=" + filepath.Join(blocker, "sub", "x.jsonl"), "not a directory"},
		{"name=archive,protocol=file,path=" + filepath.Join(dir, "x.jsonl") + ",endpoint=127.0.0.1:4317", "protocol file writes to path"},
		{"name=up,endpoint=127.0.0.1:4317,path=" + filepath.Join(dir, "x.jsonl"), "path is for protocol file"},
	} {
		for _, check := range []bool{true, false} {
			args := append(slices.Clone(base), "-dest", c.dest)
			if check {
				args = append(args, "-check")
			}
			_, stderr, code := runCLI(t, bin, args...)
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Errorf("-dest %s (check %v): exit %d, stderr %q, want an error with %q", c.dest, check, code, stderr, c.want)
			}
		}
	}
}
