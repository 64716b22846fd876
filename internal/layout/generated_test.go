package layout

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// saysGenerated reports whether the file at path says that a tool wrote it: a Go file by the
// "Code generated ... DO NOT EDIT." line before its package clause (Go's own rule), a page by
// "do not edit by hand" in its opening lines.
func saysGenerated(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if strings.HasSuffix(path, ".go") {
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "package ") {
				return false
			}
			if strings.HasPrefix(l, "// Code generated ") && strings.HasSuffix(l, " DO NOT EDIT.") {
				return true
			}
		}
		return false
	}
	var head []string
	for i := 0; i < 6 && sc.Scan(); i++ {
		head = append(head, sc.Text())
	}
	return strings.Contains(strings.ToLower(strings.Join(strings.Fields(strings.Join(head, " ")), " ")), "do not edit by hand")
}

// TestGeneratedFilesMarked: every tracked Go file and page that says a tool wrote it is marked
// linguist-generated in .gitattributes, and every file marked so says it is generated, so that
// a new generated file (a reference page, a protoc output) cannot be reviewed as hand-written.
func TestGeneratedFilesMarked(t *testing.T) {
	root := repoRoot(t)
	ls := exec.Command("git", "ls-files", "*.go", "*.md")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("git ls-files found %d files", len(files))
	}
	attr := exec.Command("git", "check-attr", "linguist-generated", "--stdin")
	attr.Dir = root
	attr.Stdin = strings.NewReader(strings.Join(files, "\n") + "\n")
	out, err = attr.Output()
	if err != nil {
		t.Fatalf("git check-attr: %v", err)
	}
	marked := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, val, _ := strings.Cut(l, ": linguist-generated: ")
		marked[name] = val == "true"
	}
	generated := 0
	for _, f := range files {
		gen := saysGenerated(t, filepath.Join(root, f))
		if gen {
			generated++
		}
		switch {
		case gen && !marked[f]:
			t.Errorf("%s says it is generated: mark it linguist-generated in .gitattributes", f)
		case !gen && marked[f]:
			t.Errorf("%s is marked linguist-generated in .gitattributes but does not say it is generated", f)
		}
	}
	if generated < 20 {
		t.Errorf("%d generated files found; the test no longer recognises them", generated)
	}
}
