package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A short sweep through the command against a real otlpgate binary alone: idle measured, every
// open-loop cell delivers exactly the spans it sent, the closed loop delivers some, each has a
// CPU figure, latencies and a peak RSS; the table has a row per intake and rate; a Collector
// that is not built is left out with a message; the charts are written.
func TestSweepCommand(t *testing.T) {
	dir, gate := buildGate(t)
	var stdout, stderr bytes.Buffer
	err := sweepCommand([]string{"-gate", gate, "-peer", filepath.Join(dir, "no-collector"), "-shapes", "small",
		"-rates", "2k,closed", "-duration", "300ms", "-warmup", "100ms", "-idle", "300ms", "-logs", dir,
		"-chart", filepath.Join(dir, "sweep")}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	progress := stderr.String()
	if !strings.Contains(progress, "no Collector columns: "+filepath.Join(dir, "no-collector")+" is not built") {
		t.Errorf("no message about the missing Collector:\n%s", progress)
	}
	if !regexp.MustCompile(`idle otlpgate: \S+ CPU in \S+ \([0-9.]+% of a core\), \d+ wake-ups, \d+ threads`).MatchString(progress) {
		t.Errorf("no idle measurement:\n%s", progress)
	}
	// The floor, the copy relay by default, is measured on the same cells as otlpgate.
	cells := regexp.MustCompile(`(otlpgate|tcp-relay-copy) small (grpc|http) (2k|closed): (\d+) spans in \S+ \(\d+/s\), \S+ CPU, ([0-9.]+) µs/span, p50 \S+, p99 \S+, peak RSS (\d+) MiB, (\d+) failed`).FindAllStringSubmatch(progress, -1)
	if len(cells) != 8 {
		t.Fatalf("%d cells measured, want 8 (otlpgate and the relay, 2 intakes, 2 rates):\n%s", len(cells), progress)
	}
	for _, c := range cells {
		// 2k spans/s of 100-span requests for 300 ms: 6 requests.
		if (c[3] == "2k" && c[4] != "600") || c[4] == "0" || c[5] == "0.000" || c[6] == "0" || c[7] != "0" {
			t.Errorf("%s %s %s: %s spans, %s µs/span, %s MiB, %s failed", c[1], c[2], c[3], c[4], c[5], c[6], c[7])
		}
	}
	if strings.Contains(progress, "idle tcp-relay") {
		t.Errorf("the floor was measured idle:\n%s", progress)
	}
	table := stdout.String()
	for _, row := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\| otlpgate \| [0-9.]+ ms \| [0-9.]+% \| [0-9.]+ \| \d+ \| \d+ \|$`),
		regexp.MustCompile(`(?m)^floor: tcp-relay-copy, a TCP relay from the load to the sink \(each byte read into a 256 KiB buffer and written out\) on the same load`),
		regexp.MustCompile(`(?m)^\| intake \| spans/s \| otlpgate CPU-µs/span \| tcp-relay-copy \(x otlpgate\) \| otlpgate p50 / p99 ms \| tcp-relay-copy p50 / p99 ms \| peak RSS MiB \(otlpgate / tcp-relay-copy\) \|$`),
		regexp.MustCompile(`(?m)^\| OTLP/gRPC \| 2k \| [0-9.]+ \| [0-9.]+ \([0-9.]+x\) \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| \d+ / \d+ \|$`),
		regexp.MustCompile(`(?m)^\| OTLP/HTTP \| closed \| [0-9.]+ \(\S+/s\) \| [0-9.]+ \([0-9.]+x, \S+/s\) \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| \d+ / \d+ \|$`),
	} {
		if !row.MatchString(table) {
			t.Errorf("no line matches %s in\n%s", row, table)
		}
	}
	if strings.Contains(table, "otelcol") {
		t.Errorf("a column for the missing Collector:\n%s", table)
	}
	for _, f := range []string{"sweep-small.png", "sweep-small.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Flags the sweep cannot run are refused before anything starts.
func TestSweepRefusesUnknown(t *testing.T) {
	for _, args := range [][]string{{"-intakes", "udp"}, {"-shapes", "medium"}, {"-rates", "5k,fast"}, {"-duration", "0s"}, {"-out", "udp"}, {"-floors", "tcp-relay,nc"}} {
		var out bytes.Buffer
		if err := sweepCommand(append(args, "-gate", "/nonexistent"), &out, &out); err == nil || strings.Contains(err.Error(), "otlpgate binary") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// With -out http otlpgate forwards over OTLP/HTTP protobuf to the sink's HTTP side, which
// receives exactly the spans sent, and the table says how otlpgate sent them.
func TestSweepOutHTTP(t *testing.T) {
	dir, gate := buildGate(t)
	var stdout, stderr bytes.Buffer
	err := sweepCommand([]string{"-gate", gate, "-peer", "", "-shapes", "small", "-intakes", "http", "-out", "http",
		"-rates", "2k", "-duration", "300ms", "-warmup", "100ms", "-idle", "0", "-floors", "", "-logs", dir}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	cells := regexp.MustCompile(`otlpgate small http 2k: (\d+) spans in .*, (\d+) failed`).FindAllStringSubmatch(stderr.String(), -1)
	if len(cells) != 1 || cells[0][1] != "600" || cells[0][2] != "0" {
		t.Fatalf("cells %q, want one of 600 spans, none failed:\n%s", cells, stderr.String())
	}
	if !strings.Contains(stdout.String(), "otlpgate sends to the sink over OTLP/HTTP protobuf") {
		t.Errorf("the table does not say otlpgate sent over OTLP/HTTP:\n%s", stdout.String())
	}
}
