package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A short anchor run through the command, against a real otlpgate binary and the relay (this
// test binary, as `relay`): every cell delivers every span it sent and has a CPU figure, each
// otlpgate figure has its ratio to the relay of the same column, and a Collector that is not
// built is left out with a message.
func TestAnchorCommand(t *testing.T) {
	dir, gate := buildGate(t)
	var stdout, stderr bytes.Buffer
	err := anchorCommand([]string{"-gate", gate, "-peer", filepath.Join(dir, "no-collector"), "-top=false",
		"-compression", "none,zstd", "-rate", "20", "-duration", "300ms", "-warmup", "100ms", "-logs", dir}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no Collector column: "+filepath.Join(dir, "no-collector")+" is not built") {
		t.Errorf("no message about the missing Collector:\n%s", stderr.String())
	}
	// Each cell's progress line: 6 batches of 1000 spans delivered, none failed.
	cells := regexp.MustCompile(`round 1 (\S+) (grpc|http)/(none|zstd): (\d+) spans, \S+ CPU, ([0-9.]+) µs/span, (\d+) failed`).FindAllStringSubmatch(stderr.String(), -1)
	if len(cells) != 12 {
		t.Fatalf("%d cells measured, want 12 (3 targets: both floors and otlpgate; 2 intakes, 2 compressions):\n%s", len(cells), stderr.String())
	}
	for _, c := range cells {
		if c[4] != "6000" || c[5] == "0.000" || c[6] != "0" {
			t.Errorf("%s %s/%s: %s spans, %s µs/span, %s failed; want 6000, a figure, 0", c[1], c[2], c[3], c[4], c[5], c[6])
		}
	}
	table := stdout.String()
	for _, row := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\| CPU-µs per span \(x relay\) \| OTLP/gRPC none \| OTLP/HTTP none \| OTLP/gRPC zstd \| OTLP/HTTP zstd \|$`),
		regexp.MustCompile(`(?m)^\| tcp-relay( \| [0-9.]+){4} \|$`),
		regexp.MustCompile(`(?m)^\| tcp-relay-copy( \| [0-9.]+ \([0-9.]+x\)){4} \|$`),
		regexp.MustCompile(`(?m)^\| otlpgate( \| [0-9.]+ \([0-9.]+x; [0-9.]+x copy\)){4} \|$`),
		// The counts per batch: otlpgate reads and writes its sockets with read(2) and write(2)
		// (at least one of each per batch) and has its GC count from its /metrics.
		regexp.MustCompile(`(?m)^\| per batch \| read calls \(syscr\) \| write calls \(syscw\) \|`),
		regexp.MustCompile(`(?m)^\| otlpgate grpc/none \| [1-9][0-9]*\.[0-9]+ \| [1-9][0-9]*\.[0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \|$`),
		regexp.MustCompile(`(?m)^\| tcp-relay http/zstd \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| - \| [0-9]+ \|$`),
	} {
		if !row.MatchString(table) {
			t.Errorf("no line matches %s in\n%s", row, table)
		}
	}
	if strings.Contains(table, "otelcol") || strings.Contains(table, "no-collector") {
		t.Errorf("a column for the missing Collector:\n%s", table)
	}
}

// A compression or intake the load cannot send is refused before anything starts.
func TestAnchorRefusesUnknown(t *testing.T) {
	for _, args := range [][]string{{"-compression", "lz4"}, {"-intakes", "udp"}, {"-out", "udp"}} {
		var out bytes.Buffer
		if err := anchorCommand(append(args, "-gate", "/nonexistent"), &out, &out); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// With -out http otlpgate sends to the sink's OTLP/HTTP listener (protocol=http), and every
// span arrives, plain and with gzip requests passed through as they came.
func TestAnchorOutHTTP(t *testing.T) {
	dir, gate := buildGate(t)
	var stdout, stderr bytes.Buffer
	err := anchorCommand([]string{"-gate", gate, "-peer", "", "-top=false", "-copy-floor=false", "-out", "http",
		"-intakes", "grpc", "-compression", "none,gzip", "-rate", "20", "-duration", "300ms", "-warmup", "100ms", "-logs", dir}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	cells := regexp.MustCompile(`round 1 otlpgate grpc/(none|gzip): (\d+) spans, \S+ CPU, ([0-9.]+) µs/span, (\d+) failed`).FindAllStringSubmatch(stderr.String(), -1)
	if len(cells) != 2 {
		t.Fatalf("%d otlpgate cells measured, want 2:\n%s", len(cells), stderr.String())
	}
	for _, c := range cells {
		if c[2] != "6000" || c[4] != "0" {
			t.Errorf("%s: %s spans, %s failed; want 6000, 0\n%s", c[1], c[2], c[4], stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "otlpgate sends to the sink over OTLP/HTTP protobuf (protocol=http)") {
		t.Errorf("the table does not say how otlpgate sent:\n%s", stdout.String())
	}
	// The sink's HTTP side took the batches: otlpgate's log names the destination's protocol.
	log, err := os.ReadFile(filepath.Join(dir, "anchor-otlpgate-grpc-none.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "protocol=http") {
		t.Errorf("otlpgate's log shows no protocol=http destination:\n%s", log)
	}
}

// builtGate is the otlpgate the tests run, built once for the test binary: each build links
// anew (seconds, more on a loaded machine), and no test writes to it.
var builtGate struct {
	once sync.Once
	dir  string // removed by TestMain
	bin  string
	out  []byte
	err  error
}

// buildGate returns a temporary directory of the test's own and the path of the otlpgate
// binary, built on the first call.
func buildGate(t *testing.T) (dir, gate string) {
	t.Helper()
	builtGate.once.Do(func() {
		if builtGate.dir, builtGate.err = os.MkdirTemp("", "otlpgate-otlpbench-"); builtGate.err != nil {
			return
		}
		builtGate.bin = filepath.Join(builtGate.dir, "otlpgate")
		builtGate.out, builtGate.err = exec.Command("go", "build", "-o", builtGate.bin, "../otlpgate").CombinedOutput()
	})
	if builtGate.err != nil {
		t.Fatalf("go build: %v\n%s", builtGate.err, builtGate.out)
	}
	return t.TempDir(), builtGate.bin
}
