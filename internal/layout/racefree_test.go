package layout

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// repoRoot is the directory of go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// isTestFunc reports whether name is one go test runs with -run: Test, Fuzz or Example,
// followed by nothing or by a character that is not a lower-case letter.
func isTestFunc(name string) bool {
	for _, prefix := range []string{"Test", "Fuzz", "Example"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if rest == "" {
				return true
			}
			r, _ := utf8.DecodeRuneInString(rest)
			return !unicode.IsLower(r)
		}
	}
	return false
}

// TestRaceFreePassRunsEveryRaceFreeTest: `make test` runs `go test -race` and then a plain pass
// with -run "$(bash .ci/race-free-tests)". Every test of every file that the race detector's
// build leaves out and the plain build compiles (a //go:build line requiring !race, however it
// is written) must be selected by that pattern, or it would run in neither pass. The build
// constraints are evaluated as go build does (go/build), not read by a pattern, so a test
// missed by the script's reading of them fails here.
func TestRaceFreePassRunsEveryRaceFreeTest(t *testing.T) {
	root := repoRoot(t)
	script := exec.Command("bash", ".ci/race-free-tests")
	script.Dir = root
	pat, err := script.Output()
	if err != nil {
		t.Fatalf(".ci/race-free-tests: %v", err)
	}
	run, err := regexp.Compile(string(pat))
	if err != nil {
		t.Fatalf(".ci/race-free-tests printed %q, not a regexp: %v", pat, err)
	}
	ls := exec.Command("git", "ls-files", "*_test.go")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	plain := build.Default
	plain.BuildTags = nil
	race := plain
	race.BuildTags = []string{"race"}
	fset := token.NewFileSet()
	files, selected := 0, map[string]bool{}
	for _, rel := range strings.Fields(string(out)) {
		dir, name := filepath.Split(filepath.Join(root, rel))
		inPlain, err := plain.MatchFile(dir, name)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		inRace, err := race.MatchFile(dir, name)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if !inPlain || inRace {
			continue
		}
		files++
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !isTestFunc(fn.Name.Name) {
				continue
			}
			if !run.MatchString(fn.Name.Name) {
				t.Errorf("%s: %s is built without -race only, and the race-free pass's -run pattern does not select it: it runs in neither pass of make test", rel, fn.Name.Name)
			}
			selected[fn.Name.Name] = true
		}
	}
	if files == 0 {
		t.Fatal("no test file is built without -race only: the allocation tests are gone, or this check reads nothing")
	}
	// The test that was once left out of both passes.
	if !selected["TestReserveSurvivesCollections"] {
		t.Error("TestReserveSurvivesCollections (pool) is not among the race-free tests the plain pass runs")
	}
	t.Logf("%d test files built without -race only, %d test functions in them", files, len(selected))
}
