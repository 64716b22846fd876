package fastpath

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWalkersGenerated runs the generator (go run ./internal/walkgen, as go generate does) on
// a copy of the files it reads, next to a walk_gen.go that does not compile, and checks that
// what it writes is the committed walk_gen.go: the committed file is current, and the
// generator depends on nothing of the package it writes for.
func TestWalkersGenerated(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"schema.go", "signal.go", "schema_test.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	broken := []byte("package fastpath\n\nfunc walkEntry( // a walker that no longer compiles\n")
	if err := os.WriteFile(filepath.Join(dir, "walk_gen.go"), broken, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "walk_gen.go")
	cmd := exec.Command("go", "run", "./internal/walkgen", "-dir", dir, "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/walkgen: %v\n%s", err, b)
	}
	want, err := os.ReadFile("walk_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("walk_gen.go is stale: run go generate ./fastpath (or make generate) and commit it")
	}
}
