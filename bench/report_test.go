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
	for _, want := range []string{"small batches, 2 ms RTT", "small batches, 200 ms RTT", "batches/cpusec", "800", "4.00", "32.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
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
