package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/otlpgate/otlpgate/bench"
)

// The appendix starts its delay line as `<this executable> delay ...`, and the anchor its
// relay as `<this executable> relay ...`; under go test the executable is the test binary,
// which therefore serves those commands too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if run, ok := map[string]func([]string) error{"delay": cmdDelay, "relay": cmdRelay}[os.Args[1]]; ok {
			if err := run(os.Args[2:]); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	code := m.Run()
	if builtGate.dir != "" {
		os.RemoveAll(builtGate.dir)
	}
	os.Exit(code)
}

// A tiny appendix run through the command: the delay line in a child process, JSON and charts
// written, every batch acknowledged.
func TestAppendixCommand(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "a.json")
	err := cmdAppendix([]string{"-scale", "0.001", "-shapes", "small", "-rtts", "20us,2ms",
		"-modes", "GRPC/Unary,GRPC/Stream/LBTimed/Async/1", "-json", js, "-chart", filepath.Join(dir, "c")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(r.Rows))
	}
	for _, row := range r.Rows {
		if row.Batches != 10 || row.Errors != 0 || row.Spans != 1000 || row.CPU <= 0 || row.Wall <= 0 {
			t.Errorf("row %+v", row)
		}
	}
	if len(r.Factors) != 2 {
		t.Errorf("%d factors, want 2", len(r.Factors))
	}
	for _, f := range []string{"c-small.png", "c-small.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := cmdAppendix([]string{"-modes", "GRPC/Nothing"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

func TestParseShape(t *testing.T) {
	if s, err := parseShape("large"); err != nil || s.Spans != 500 || s.Attrs != 10 {
		t.Errorf("large: %+v %v", s, err)
	}
	if _, err := parseShape("medium"); err == nil {
		t.Error("medium accepted")
	}
}

// An intake the load generator cannot send is refused before anything starts.
func TestProxyUnknownIntake(t *testing.T) {
	err := cmdProxy([]string{"-intake", "udp", "-gate", "/nonexistent"})
	if err == nil || err.Error() != `proxy: unknown -intake "udp" (want grpc, http-proto or http-json)` {
		t.Fatalf("got %v", err)
	}
}
