package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testRows = []Row{
	{Mode: "GRPC/Unary", RTT: 2 * time.Millisecond, Shape: "small", Batches: 800, Spans: 80000, CPU: 2 * time.Second, Wall: 4 * time.Second},
	{Mode: "GRPC/Stream/LBTimed/Async/1", RTT: 2 * time.Millisecond, Shape: "small", Batches: 800, Spans: 80000, CPU: time.Second, Wall: time.Second},
	{Mode: "GRPC/Unary", RTT: 200 * time.Millisecond, Shape: "small", Batches: 40, Spans: 4000, CPU: time.Second / 10, Wall: 8 * time.Second},
	{Mode: "GRPC/Stream/LBTimed/Async/1", RTT: 200 * time.Millisecond, Shape: "small", Batches: 40, Spans: 4000, CPU: time.Second / 20, Wall: time.Second / 4},
}

func TestRowsAndFactors(t *testing.T) {
	if got := testRows[0].BatchesPerCPUSec(); got != 400 {
		t.Fatalf("batches/cpusec = %v", got)
	}
	if got := testRows[0].BatchesPerWallSec(); got != 200 {
		t.Fatalf("batches/wallsec = %v", got)
	}
	fs := Factors(testRows, "GRPC/Unary")
	if len(fs) != 2 || fs[0].Factor != 4 || fs[1].Factor != 32 {
		t.Fatalf("factors %+v, want 4 at 2 ms and 32 at 200 ms", fs)
	}
	var out bytes.Buffer
	WriteRows(&out, testRows)
	WriteFactors(&out, fs, "GRPC/Unary")
	for _, want := range []string{"small batches, 2 ms RTT", "small batches, 200 ms RTT", "batches/cpusec", "800", "4.00", "32.00", "steady/wallsec"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	for i, line := range strings.Split(out.String(), "\n") {
		if strings.TrimRight(line, " \t") != line {
			t.Errorf("line %d ends in white space: %q", i+1, line)
		}
	}
	// 40 batches in 0.25 s at 200 ms: 160/s overall, 40/(0.25-0.2) = 800/s once the pipe is full.
	if got := testRows[3].SteadyPerWallSec(); got < 799.9 || got > 800.1 {
		t.Errorf("steady rate = %v, want 800", got)
	}
	if !strings.Contains(out.String(), "  800\n") {
		t.Errorf("the 200 ms stream row does not end in its steady rate 800:\n%s", out.String())
	}
	if got := (Row{Batches: 1, RTT: time.Second, Wall: time.Second}).SteadyPerWallSec(); got != 0 {
		t.Errorf("steady rate of a run no longer than a round trip = %v, want 0", got)
	}
}

func TestJSONAndChart(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	if err := WriteJSON(js, Report{Command: "otlpbench appendix", Rows: testRows, Factors: Factors(testRows, "GRPC/Unary")}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(js)
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Rows) != 4 || back.Rows[1].Wall != time.Second {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	png, svg := filepath.Join(dir, "c.png"), filepath.Join(dir, "c.svg")
	if err := Chart(testRows, "small", png, svg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{png, svg} {
		if st, err := os.Stat(p); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if err := Chart(testRows, "large", png); err == nil {
		t.Fatal("chart without rows did not fail")
	}
}
