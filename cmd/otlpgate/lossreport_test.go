package main

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// stopLine returns the attributes of the gateway's last log line, "stopped".
func stopLine(t *testing.T, g *gateway) map[string]string {
	t.Helper()
	var line string
	for _, l := range strings.Split(g.stderr.String(), "\n") {
		if strings.Contains(l, "msg=stopped ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no stop line:\n%s", g.stderr.String())
	}
	attrs := map[string]string{}
	for _, m := range logAttr.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		attrs[m[1]] = v
	}
	return attrs
}

// logAttr is one key=value of a logfmt line, the value quoted or not.
var logAttr = regexp.MustCompile(`([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)`)

// checkStopLine compares the stop line's loss report with want.
func checkStopLine(t *testing.T, g *gateway, want map[string]string) {
	t.Helper()
	got := stopLine(t, g)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stop line %s=%q, want %q\n%s", k, got[k], v, g.stderr.String())
		}
	}
}

// logLines returns the log lines holding every one of subs.
func logLines(g *gateway, subs ...string) []string {
	var out []string
next:
	for _, l := range strings.Split(g.stderr.String(), "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// A v1 upstream that refuses every batch (as grpc-go does what it cannot decode): every
// acknowledged span is dropped, the log says why with the upstream's own message (at most a
// line a second, each with the refusals since the one before), and the stop line reports the loss by reason instead of lost=false.
func TestRejectedByV1UpstreamLoggedAndReported(t *testing.T) {
	bin := buildBinary(t)
	u := testkit.StartGRPCSink(t, "")
	u.SetRefuse(status.New(codes.InvalidArgument, "grpc: error unmarshalling request: unexpected EOF"))
	g := startGateway(t, bin, "-http.listen", "", "-batch.max-age", "10ms", "-shutdown.timeout", "5s",
		"-dest", "name=up,endpoint="+u.Addr()+",protocol=v1,mode=unary,insecure=true")
	waitReady(t, g)
	l := newLoader(11, otlpgen.Shape{Spans: 5, Attrs: 2})
	sent := sendAcked(t, g, l, 20)
	testkit.WaitFor(t, "every span to be dropped as rejected", func() bool {
		return scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`, `reason="rejected"`) == float64(len(sent))
	})
	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v, want 0: nothing was lost at the stop itself\n%s", g.exitErr, g.stderr.String())
	}
	if n, _ := u.SpanCount(); n != 0 || u.Refused() == 0 || u.Refused() != len(u.Requests()) {
		t.Fatalf("upstream accepted %d spans, refused %d of %d requests; want 0 accepted, every request refused", n, u.Refused(), len(u.Requests()))
	}
	lines := logLines(g, `msg="upstream rejected a batch"`, `destination=up`)
	if len(lines) == 0 {
		t.Fatalf("no line says the upstream rejected batches:\n%s", g.stderr.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, `message="InvalidArgument: grpc: error unmarshalling request: unexpected EOF"`) {
			t.Errorf("rejection line without the upstream's message: %s", l)
		}
	}
	// Each line counts the refusals since the line before (at most one a second): together
	// they never count more than the upstream refused.
	logged := 0
	for _, l := range lines {
		m := regexp.MustCompile(` requests=(\d+) `).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("rejection line without its count: %s", l)
		}
		n, _ := strconv.Atoi(m[1])
		logged += n
	}
	if logged < len(lines) || logged > u.Refused() {
		t.Errorf("%d lines count %d refused requests; the upstream refused %d", len(lines), logged, u.Refused())
	}
	items := strconv.Itoa(len(sent))
	checkStopLine(t, g, map[string]string{"lost": "true", "delivered_items": "0", "lost_items": items,
		"unanswered_items": "0", "spooled_items": "0", "dropped": "rejected=" + items})
}

// With the spool, an OTEP stream upstream that answers FailedNoneRetryable to everything: the
// spooled records are dropped as rejected (the upstream's doing), not as undeliverable, the log
// says so, and the stop line reports the loss.
func TestSpoolRejectedCountedAsRejected(t *testing.T) {
	bin := buildBinary(t)
	u := testkit.StartGRPCSink(t, "")
	u.SetRefuse(status.New(codes.InvalidArgument, "unused: a stream answers FailedNoneRetryable"))
	g := spoolGateway(t, bin, t.TempDir(), u.Addr())
	l := newLoader(12, otlpgen.Shape{Spans: 4, Attrs: 2})
	const requests = 15
	sent := sendAcked(t, g, l, requests)
	testkit.WaitFor(t, "every spooled record to be dropped", func() bool {
		return scrape(t, g.admin, "otlpgate_spool_dropped_records_total", `destination="up"`) == requests
	})
	if v := scrape(t, g.admin, "otlpgate_spool_dropped_records_total", `destination="up"`, `reason="rejected"`); v != requests {
		t.Errorf("spool dropped records (rejected) %v, want %d", v, requests)
	}
	if v := scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`, `reason="rejected"`); v != float64(len(sent)) {
		t.Errorf("client dropped items (rejected) %v, want %d", v, len(sent))
	}
	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	if n, _ := u.SpanCount(); n != 0 {
		t.Errorf("upstream accepted %d spans, want 0", n)
	}
	if lines := logLines(g, `msg="upstream rejected a batch"`, `message="client: the upstream answered FailedNoneRetryable"`); len(lines) == 0 {
		t.Errorf("no line says the upstream rejected batches:\n%s", g.stderr.String())
	}
	items := strconv.Itoa(len(sent))
	checkStopLine(t, g, map[string]string{"lost": "true", "delivered_items": "0", "lost_items": items,
		"unanswered_items": "0", "spooled_items": "0", "dropped": "rejected=" + items})
}

// A slow upstream at SIGTERM: what it received and did not answer is reported apart from what
// it never received, each count exactly what the upstream did or did not get, and only the
// latter as not delivered; exit status 3.
func TestShutdownReportsUnansweredApart(t *testing.T) {
	bin := buildBinary(t)
	u := testkit.StartGRPCSink(t, "")
	u.SetSilent(true) // reads every request, answers none
	g := startGateway(t, bin, "-http.listen", "", "-batch.max-age", "10ms", "-shutdown.timeout", "2s",
		"-dest", upstreamDest(u)+",streams=1,window=2")
	waitReady(t, g)
	l := newLoader(13, otlpgen.Shape{Spans: 3, Attrs: 1})
	// Two batches fill the window (one request each, the second sent once the first arrived),
	// and the rest wait in the destination's queue.
	var sent []uint64
	for i := range 2 {
		sent = append(sent, sendAcked(t, g, l, 1)...)
		testkit.WaitFor(t, "the upstream to receive the batch", func() bool { return len(u.Requests()) == i+1 })
	}
	sent = append(sent, sendAcked(t, g, l, 10)...)
	g.terminate(t)
	var ee *exec.ExitError
	if !errors.As(g.exitErr, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3\n%s", g.exitErr, g.stderr.String())
	}
	received, dups := u.SpanCount()
	if len(u.Requests()) != 2 || dups != 0 || received == 0 || received >= len(sent) {
		t.Fatalf("upstream received %d spans (%d duplicates) in %d requests; want some of %d in 2", received, dups, len(u.Requests()), len(sent))
	}
	notSent := len(sent) - received
	checkStopLine(t, g, map[string]string{"lost": "true", "delivered_items": "0",
		"lost_items": strconv.Itoa(notSent), "unanswered_items": strconv.Itoa(received), "spooled_items": "0",
		"dropped": "shutdown_queued=" + strconv.Itoa(notSent) + " shutdown_pending=" + strconv.Itoa(received)})
	lines := g.errorLines()
	if len(lines) != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", len(lines), g.stderr.String())
	}
	want := "at the shutdown deadline " + strconv.Itoa(notSent) + " items"
	want2 := "and " + strconv.Itoa(received) + " items (2 requests) sent without an answer, perhaps delivered"
	for _, w := range []string{want, want2} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("loss line lacks %q:\n%s", w, lines[0])
		}
	}
}
