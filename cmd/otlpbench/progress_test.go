package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/bench"
)

// Written to a file (as to a pipe), progress is one line per finished run, with no carriage
// return.
func TestProgressOffTerminal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	p := newProgress(f)
	if p.tty {
		t.Fatal("a regular file taken for a terminal")
	}
	for i := range 100 {
		p.batches("[1/2] GRPC/Unary small 2 ms", i, 100)
	}
	p.finished("[1/2] GRPC/Unary small 2 ms", bench.Row{Batches: 100, Wall: time.Second, CPU: time.Second / 2}, nil)
	p.batches("[2/2] GRPC/Unary small 20 ms", 1, 100)
	p.finished("[2/2] GRPC/Unary small 20 ms", bench.Row{}, os.ErrDeadlineExceeded)
	f.Close()
	b, _ := os.ReadFile(path)
	got := string(b)
	want := "[1/2] GRPC/Unary small 2 ms: 100 batches in 1.00s, 200 batches/cpusec, 100 batches/wallsec, 0 errors\n" +
		"[2/2] GRPC/Unary small 20 ms: i/o timeout\n"
	if got != want || strings.Contains(got, "\r") {
		t.Fatalf("progress off a terminal:\n%q\nwant\n%q", got, want)
	}
}
