package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// A -dest.file with more destinations than -dest.file.max-destinations stops the binary at
// start with an error naming the count and the flag, at the default bound (1,000) as at one set
// lower; a reload that would go past the bound is refused like an invalid file, counted, logged,
// and the running destinations keep running.
func TestBinaryDestFileMaxDestinations(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	write := func(path string, n int) {
		t.Helper()
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "name=d%d,endpoint=%s,protocol=v1,mode=unary\n", i, up.Addr())
		}
		if err := os.WriteFile(path+".tmp", []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		n    int
		args []string
		want string
	}{
		{1001, nil, "-dest.file holds 1001 destinations, more than -dest.file.max-destinations 1000"},
		{3, []string{"-dest.file.max-destinations", "2"}, "-dest.file holds 3 destinations, more than -dest.file.max-destinations 2"},
		{1, []string{"-dest.file.max-destinations", "0"}, "-dest.file.max-destinations must be at least 1"},
	} {
		path := filepath.Join(dir, fmt.Sprintf("dests%d", c.n))
		write(path, c.n)
		out, err := runBinary(t, bin, append([]string{"-dest.file", path}, c.args...)...)
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%d destinations, %q: %v, output:\n%s\nwant %q", c.n, c.args, err, out, c.want)
		}
	}

	path := filepath.Join(dir, "reloaded")
	write(path, 2)
	g := startGateway(t, bin, "-dest.file", path, "-dest.file.max-destinations", "2", "-dest.file.poll-interval", "0")
	waitReady(t, g)
	write(path, 3)
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the refused reload counted", func() bool {
		return scrape(t, g.admin, "otlpgate_config_reload_failures_total") == 1
	})
	if !strings.Contains(g.stderr.String(), "-dest.file holds 3 destinations, more than -dest.file.max-destinations 2") {
		t.Errorf("the refusal's reason is not logged:\n%s", g.stderr.String())
	}
	if n := scrape(t, g.admin, "otlpgate_config_reloads_total"); n != 0 {
		t.Errorf("otlpgate_config_reloads_total %v after a refused reload, want 0", n)
	}
	testkit.WaitFor(t, "the status listing the two destinations that ran", func() bool {
		var names []string
		for _, d := range fetchStatus(t, g.admin).Destinations {
			names = append(names, d.Name)
		}
		return strings.Join(names, " ") == "d0 d1"
	})
	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
}
