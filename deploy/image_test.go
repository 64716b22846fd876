package deploy

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfile returns the Dockerfile's instructions by keyword, in order (continuation lines are
// not used in it).
func dockerfile(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		kw, rest, _ := strings.Cut(l, " ")
		out[strings.ToUpper(kw)] = append(out[strings.ToUpper(kw)], rest)
	}
	return out
}

// execForm parses an instruction in JSON (exec) form.
func execForm(t *testing.T, kw string, v []string) []string {
	t.Helper()
	if len(v) != 1 {
		t.Fatalf("Dockerfile: %d %s instructions, want one", len(v), kw)
	}
	var out []string
	if err := json.Unmarshal([]byte(v[0]), &out); err != nil {
		t.Fatalf("Dockerfile: %s %s is not in exec form: %v", kw, v[0], err)
	}
	return out
}

// `docker run` of the image with no arguments serves OTLP on every interface of the container:
// otlpgate's own defaults are 127.0.0.1, which a published port does not reach. The command is
// one otlpgate -check accepts.
func TestDockerfileDefaultCommand(t *testing.T) {
	d := dockerfile(t)
	entry := execForm(t, "ENTRYPOINT", d["ENTRYPOINT"])
	if len(entry) != 1 || entry[0] != "/usr/local/bin/otlpgate" {
		// Flags in the entrypoint would come before every argument a user or a pod passes, and
		// no configuration file could change what they set.
		t.Errorf("ENTRYPOINT %q: want the binary alone, the flags in CMD", entry)
	}
	cmd := execForm(t, "CMD", d["CMD"])
	exposed := map[string]bool{}
	for _, v := range d["EXPOSE"] {
		for _, p := range strings.Fields(v) {
			exposed[p] = true
		}
	}
	set := map[string]string{}
	for _, a := range cmd {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "-"), "="); ok {
			set[k] = v
		}
	}
	for _, f := range []string{"grpc.listen", "http.listen", "admin.listen"} {
		addr, ok := set[f]
		if !ok {
			t.Errorf("CMD does not set -%s: otlpgate's default listens on 127.0.0.1 only", f)
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
			t.Errorf("CMD: -%s=%s does not listen on every interface", f, addr)
		}
		if !exposed[port] {
			t.Errorf("CMD: -%s=%s: port %s is not EXPOSEd (%v)", f, addr, port, d["EXPOSE"])
		}
	}
	out, err := exec.Command(otlpgateBinary(t), append(cmd, "-check")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "grpc :4317, http :4318") {
		t.Errorf("otlpgate %s -check: %v\n%s", strings.Join(cmd, " "), err, out)
	}
}

// The image carries the version: `make image` passes VERSION and COMMIT from git as build
// arguments, the Dockerfile's build stage hands them to `make static`, whose -ldflags stamp
// them into the binary (-version, otlpgate_build_info), and the image is labelled with them.
func TestImageCarriesVersion(t *testing.T) {
	mk := needTool(t, "make")
	d := dockerfile(t)
	for _, want := range []struct{ kw, v string }{
		{"ARG", "VERSION=unknown"},
		{"ARG", "COMMIT=unknown"},
		{"RUN", "make static VERSION=$VERSION COMMIT=$COMMIT"},
		{"LABEL", "org.opencontainers.image.version=$VERSION org.opencontainers.image.revision=$COMMIT"},
	} {
		found := false
		for _, v := range d[want.kw] {
			found = found || v == want.v
		}
		if !found {
			t.Errorf("Dockerfile has no %s %s", want.kw, want.v)
		}
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			t.Skipf("git %s: %v: not a git checkout", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	version, commit := git("describe", "--tags", "--always", "--dirty"), git("rev-parse", "HEAD")
	out, err := exec.Command(mk, "-s", "-C", "..", "-n", "image", "IMAGE=registry.example.com/otlpgate").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, out)
	}
	for _, want := range []string{"--build-arg VERSION=" + version + " ", "--build-arg COMMIT=" + commit + " ", "-t registry.example.com/otlpgate:" + version + " "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make image does not pass %q:\n%s", want, out)
		}
	}
	// The Dockerfile's build step, outside Docker: the version given as build arguments is the
	// one the binary prints.
	bin := t.TempDir()
	build := exec.Command(mk, "-s", "-C", "..", "static", "BIN="+bin, "VERSION=v9.8.7-image", "COMMIT=0123456789abcdef0123456789abcdef01234567")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make static: %v\n%s", err, out)
	}
	got, err := exec.Command(filepath.Join(bin, "static", "otlpgate"), "-version").CombinedOutput()
	if err != nil || !regexp.MustCompile(`^otlpgate v9\.8\.7-image \(commit 0123456789abcdef0123456789abcdef01234567, go`).Match(got) {
		t.Errorf("the static build's -version: %v %q", err, got)
	}
}
