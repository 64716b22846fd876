package testkit

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// PinnedTool returns the tool built at bin/tools/name of the repository at root (the relative
// path from the test's package to the repository, "../.." from internal/hostile) when it is the
// version the Makefile pins in its variable versionVar and was built from the Go module
// module; make target builds it. Without it the test skips, saying how to build it; in CI
// (CI=true) it fails instead, so that CI never passes by skipping (.ci/run builds every pinned
// tool).
func PinnedTool(t testing.TB, root, name, versionVar, module, target string) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(versionVar) + `\s*:=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("the Makefile pins no %s", versionVar)
	}
	want := string(m[1])
	p, err := filepath.Abs(filepath.Join(root, "bin", "tools", name))
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(p)
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case info.Main.Path != module || info.Main.Version != want:
		why = fmt.Sprintf("%s is %s %s", p, info.Main.Path, info.Main.Version)
	default:
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s %s is not built (%s); .ci/run builds it with make %s", name, want, why, target)
	}
	t.Skipf("%s %s is not built (%s): run make %s (once)", name, want, why, target)
	return ""
}
