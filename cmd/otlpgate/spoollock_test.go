package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// Two otlpgate processes given one -spool.dir (a second release on the same hostPath, a
// systemd unit started twice) would append to the same segments and checkpoint over each
// other's cursors. The second is refused at start, naming the directory and the process that
// holds it, and the first keeps running; after the first is killed with SIGKILL, a start on
// the directory succeeds at once (the kernel dropped the lock) and delivers what the first
// acknowledged.
func TestBinarySpoolDirOneProcess(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	up := testkit.FreeAddr(t) // down until the restart
	g := spoolGateway(t, bin, dir, up)
	l := newLoader(1, otlpgen.Shape{Spans: 5, Attrs: 1})
	acked := sendAcked(t, g, l, 20)

	out, err := runBinary(t, bin, "-spool.dir", dir, "-dest", "name=up,endpoint="+up+",protocol=otep")
	if code := exitCode(err); code != 1 {
		t.Fatalf("a second process on the spool directory: exit status %d, want 1 (refused at start):\n%s", code, out)
	}
	pid := strconv.Itoa(g.cmd.Process.Pid)
	if !strings.Contains(string(out), dir) || !strings.Contains(string(out), "process "+pid) || !strings.Contains(string(out), "-spool.dir") {
		t.Errorf("the refusal names neither the directory, the holder %s nor the flag:\n%s", pid, out)
	}
	select {
	case <-g.exited:
		t.Fatalf("the first process exited: %v\n%s", g.exitErr, g.stderr.String())
	default:
	}
	more := sendAcked(t, g, l, 5)

	kill9(t, g)
	g2 := spoolGateway(t, bin, dir, up)
	u := testkit.StartGRPCSink(t, up)
	dups, distinct := arrived(t, u, append(acked, more...), l.sent)
	t.Logf("%d distinct spans arrived after the restart, %d duplicates", distinct, dups)
	g2.terminate(t)
	if g2.exitErr != nil {
		t.Errorf("exit: %v\n%s", g2.exitErr, g2.stderr.String())
	}
}
