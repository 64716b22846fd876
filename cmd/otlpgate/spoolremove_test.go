package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// sendRetrying sends n trace requests one at a time, each again while it is refused
// (backpressure, as an OTLP client retries) for up to 10 s, and fails the test on one that is
// never accepted. It returns the span ids sent and how many answers were refusals.
func sendRetrying(t *testing.T, g *gateway, l *loader, n int) (ids []uint64, refused int) {
	t.Helper()
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := otepv1.NewUnaryExporterClient(conn)
	for i := range n {
		req, sp := l.next()
		for deadline := time.Now().Add(10 * time.Second); ; {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := c.ExportTraces(ctx, req)
			cancel()
			if err == nil && resp.ResultCode == otepv1.ResultCode_Success {
				break
			}
			refused++
			if time.Now().After(deadline) {
				t.Fatalf("request %d of %d still refused after 10 s (%d refusals so far): %v %v; spool bytes %v\n%s",
					i+1, n, refused, resp, err, scrape(t, g.admin, "otlpgate_spool_bytes"), g.stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		l.ack(sp)
		ids = append(ids, sp...)
	}
	return ids, refused
}

// writeDestFile replaces the -dest.file at path atomically.
func writeDestFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// reload sends SIGHUP and waits until otlpgate_config_reloads_total reaches n.
func reload(t *testing.T, g *gateway, n int) {
	t.Helper()
	g.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "the reload", func() bool { return scrape(t, g.admin, "otlpgate_config_reloads_total") >= float64(n) })
}

// A destination removed from -dest.file used to pin the spool for good: the checkpoint kept
// every segment from the removed destination's position, which never moved again, and once the
// spool was full every request was refused (1,389 of 2,000 in the report), though the
// destination left was healthy and caught up. Two destinations, a 64 KiB spool; 200 requests;
// b removed and SIGHUP; 2,000 more requests must all be accepted (a client retries a refusal,
// as OTLP clients do; none stays refused) and reach a. When b had delivered everything it
// owed nothing and lets go at once; when its upstream was down it holds its 60 records until
// it would hold more than -spool.removed-hold-bytes, then they are counted as dropped (reason
// removed, or undeliverable for what its drain gave up) and logged with its name. When b owed
// nothing and a keeps up, none is refused even once: an append that finds the spool full frees
// what every destination finished first, rather than leave it to the next checkpoint (12 of
// the 2,000 were refused before).
func TestBinaryRemovedDestinationReleasesTheSpool(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name  string
		bDown bool
		first int
	}{
		{"caught-up", false, 200},
		{"owing", true, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testkit.StartGRPCSink(t, "")
			var bAddr string
			var b *testkit.GRPCSink
			if tc.bDown {
				bAddr = testkit.FreeAddr(t) // nobody listens
			} else {
				b = testkit.StartGRPCSink(t, "")
				bAddr = b.Addr()
			}
			spec := func(name, addr string) string {
				return "name=" + name + ",endpoint=" + addr + ",protocol=otep,mode=stream,retry-initial=20ms,retry-max=200ms"
			}
			path := filepath.Join(t.TempDir(), "destinations")
			writeDestFile(t, path, spec("a", a.Addr()), spec("b", bAddr))
			g := startGateway(t, bin, "-http.listen", "", "-spool.dir", t.TempDir(), "-spool.max-bytes", "64KiB",
				"-spool.segment-bytes", "4KiB", "-dest.file", path, "-dest.file.poll-interval", "0",
				"-batch.max-age", "5ms", "-shutdown.timeout", "2s")
			waitReady(t, g)
			l := newLoader(7, otlpgen.Shape{Spans: 2, Attrs: 2})
			first, _ := sendRetrying(t, g, l, tc.first)
			if n := a.WaitSpans(first); n > 0 {
				t.Fatalf("a: %d of %d spans never arrived", n, len(first))
			}
			if b != nil {
				if n := b.WaitSpans(first); n > 0 {
					t.Fatalf("b: %d of %d spans never arrived", n, len(first))
				}
			}

			writeDestFile(t, path, spec("a", a.Addr()))
			reload(t, g, 1)
			var more []uint64
			var refused int
			if tc.bDown {
				more, refused = sendRetrying(t, g, l, 2000)
			} else {
				// a keeps up: each 50 requests (about 20 KiB of the 64 KiB spool) reach it
				// before the next are sent, so that a full spool holds finished records.
				for range 40 {
					ids, n := sendRetrying(t, g, l, 50)
					if m := a.WaitSpans(ids); m > 0 {
						t.Fatalf("a: %d of %d spans never arrived", m, len(ids))
					}
					more, refused = append(more, ids...), refused+n
				}
			}
			if n := a.WaitSpans(more); n > 0 {
				t.Fatalf("a: %d of %d spans sent after b's removal never arrived", n, len(more))
			}
			testkit.WaitFor(t, "b's release", func() bool {
				return scrape(t, g.admin, "otlpgate_spool_released_destinations_total") == 1
			})
			removed := scrape(t, g.admin, "otlpgate_spool_dropped_records_total", `destination="b"`, `reason="removed"`)
			gaveUp := scrape(t, g.admin, "otlpgate_spool_dropped_records_total", `destination="b"`, `reason="undeliverable"`)
			t.Logf("%d requests after the removal, %d refusals retried; b: %v records dropped as removed, %v as undeliverable",
				len(more)/2, refused, removed, gaveUp)
			if tc.bDown {
				if removed+gaveUp != float64(tc.first) || removed == 0 {
					t.Errorf("b owed %d records: %v counted as removed, %v as undeliverable", tc.first, removed, gaveUp)
				}
				if !strings.Contains(g.stderr.String(), "destination=b records=") {
					t.Errorf("no log line names b and what it owed:\n%s", g.stderr.String())
				}
			} else {
				if removed+gaveUp != 0 {
					t.Errorf("b owed nothing, yet %v records were counted as removed, %v as undeliverable", removed, gaveUp)
				}
				if refused != 0 {
					t.Errorf("%d requests refused, though b owed nothing and a had finished what filled the spool", refused)
				}
			}
			if got := scrape(t, g.admin, "otlpgate_spool_bytes"); got > 64<<10 {
				t.Errorf("spool holds %v bytes", got)
			}
			g.terminate(t)
			if g.exitErr != nil {
				t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
			}
		})
	}
}

// A destination renamed in -dest.file used to lose its backlog silently at the next start:
// the start did not list the old name, deleted its segments as finished, and no counter moved
// (299 acknowledged spans in the report). Its upstream down, 300 requests spooled for "old";
// the file renames it to "new" (same endpoint) and SIGHUP; the upstream comes back; 100 more;
// SIGTERM (exit 0); a start with the same file. With spool-id=old on the renamed destination,
// the documented way, every acknowledged span arrives and nothing is released. Without it, the
// start counts the 300 records "old" still owed as dropped (reason released), logs them with
// its name and says so in its start line.
func TestBinarySpoolRenamedDestination(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name    string
		spoolID string
	}{
		{"spool-id", ",spool-id=old"},
		{"renamed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := testkit.FreeAddr(t) // down until after the reload
			spec := func(name, extra string) string {
				return "name=" + name + ",endpoint=" + up + ",protocol=otep,mode=stream,retry-initial=20ms,retry-max=200ms" + extra
			}
			path := filepath.Join(t.TempDir(), "destinations")
			dir := t.TempDir()
			writeDestFile(t, path, spec("old", ""))
			args := []string{"-http.listen", "", "-spool.dir", dir, "-dest.file", path, "-dest.file.poll-interval", "0",
				"-batch.max-age", "5ms", "-shutdown.timeout", "2s"}
			g := startGateway(t, bin, args...)
			waitReady(t, g)
			l := newLoader(11, otlpgen.Shape{Spans: 2, Attrs: 2})
			before := sendAcked(t, g, l, 300)

			writeDestFile(t, path, spec("new", tc.spoolID))
			reload(t, g, 1)
			// The upstream comes back only after the old instance's drain gave up (a longer
			// outage): what it held stays in the spool.
			testkit.WaitFor(t, "the removed destination's drain to give up", func() bool {
				return strings.Contains(g.stderr.String(), "what it did not deliver stays in the spool")
			})
			u := testkit.StartGRPCSink(t, up)
			after := sendAcked(t, g, l, 100)
			if n := u.WaitSpans(after); n > 0 {
				t.Fatalf("%d of %d spans sent after the rename never arrived", n, len(after))
			}
			g.terminate(t)
			if g.exitErr != nil {
				t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
			}

			g2 := startGateway(t, bin, args...)
			waitReady(t, g2)
			released := scrape(t, g2.admin, "otlpgate_spool_dropped_records_total", `destination="old"`, `reason="released"`)
			startLine := ""
			for _, line := range strings.Split(g2.stderr.String(), "\n") {
				if strings.Contains(line, `msg="spool open"`) {
					startLine = line
				}
			}
			if tc.spoolID != "" {
				if n := u.WaitSpans(l.ackedIDs()); n > 0 {
					t.Errorf("%d of %d acknowledged spans never arrived", n, len(l.ackedIDs()))
				}
				if released != 0 || strings.Contains(startLine, "released") {
					t.Errorf("%v records released at the second start; start line: %s", released, startLine)
				}
			} else {
				missing := u.Fewer(before, 1)
				if missing == 0 {
					t.Fatal("the old name's backlog arrived without spool-id: the scenario did not happen")
				}
				// Each request is one record of two spans.
				if released != float64(missing)/2 || released != 300 {
					t.Errorf("%d spans (of 600 spooled for old) never arrived; %v records counted as released, want 300", missing, released)
				}
				if !strings.Contains(startLine, "released=[old:300]") {
					t.Errorf("the start line does not report the release: %s", startLine)
				}
				if !strings.Contains(g2.stderr.String(), "destination=old records=300") {
					t.Errorf("no log line names old and the 300 records it owed:\n%s", g2.stderr.String())
				}
			}
			g2.terminate(t)
			if g2.exitErr != nil {
				t.Errorf("exit: %v\n%s", g2.exitErr, g2.stderr.String())
			}
		})
	}
}
