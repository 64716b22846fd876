package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// spoolHeldUpstream starts an upstream that holds its answers and a gateway with the spool and
// -dest.file naming it (one stream, one request in flight, header x-gen:1), then sends one
// request, which the upstream receives and does not answer, and ten more, which the
// destination reads from the spool and queues behind it. It returns the span ids the gateway
// acknowledged.
func spoolHeldUpstream(t *testing.T, bin string) (*testkit.GRPCSink, *gateway, string, []uint64) {
	t.Helper()
	u := testkit.StartGRPCSink(t, "")
	u.HoldAnswers()
	path := filepath.Join(t.TempDir(), "destinations")
	writeDestFile(t, path, destLine(u, "1"))
	g := startGateway(t, bin, "-http.listen", "", "-spool.dir", t.TempDir(), "-dest.file", path,
		"-dest.file.poll-interval", "0", "-batch.max-age", "10ms", "-shutdown.timeout", "1s")
	waitReady(t, g)
	l := newLoader(21, otlpgen.Shape{Spans: 3, Attrs: 1})
	var sent []uint64
	sent = append(sent, sendAcked(t, g, l, 1)...)
	testkit.WaitFor(t, "the upstream to receive the batch", func() bool { return len(u.Requests()) == 1 })
	sent = append(sent, sendAcked(t, g, l, 10)...) // queued behind it
	testkit.WaitFor(t, "the destination to read every record", func() bool {
		return scrape(t, g.admin, "otlpgate_spool_reads_total") == scrape(t, g.admin, "otlpgate_spool_appended_records_total")
	})
	return u, g, path, sent
}

// destLine is the -dest.file line of u's destination, with header x-gen:gen.
func destLine(u *testkit.GRPCSink, gen string) string {
	return "name=up,endpoint=" + u.Addr() + ",protocol=otep,mode=stream,insecure=true,streams=1,window=1," +
		"retry-initial=20ms,retry-max=200ms,header=x-gen:" + gen
}

// With the spool, a destination a reload replaces (its header changed) while its upstream
// holds every answer gives up, at -shutdown.timeout, what it had in flight and queued; those
// records stay in the spool and its replacement delivers them. That is no drop: nothing is
// counted in otlpgate_client_dropped_items_total, the hand-back is counted apart, and the stop
// line says lost=false with nothing dropped and nothing spooled. It used to count them as
// shutdown_pending and shutdown_queued drops, and the stop line reported them.
func TestBinarySpoolReplacedDestinationDropsNothing(t *testing.T) {
	bin := buildBinary(t)
	u, g, path, sent := spoolHeldUpstream(t, bin)
	writeDestFile(t, path, destLine(u, "2"))
	reload(t, g, 1)
	// The replacement starts once the replaced one stopped (it gave up at -shutdown.timeout).
	testkit.WaitFor(t, "the replacement's first request", func() bool {
		for _, r := range u.Requests() {
			if v := r.MD.Get("x-gen"); len(v) == 1 && v[0] == "2" {
				return true
			}
		}
		return false
	})
	u.ReleaseAnswers()
	if missing := u.WaitSpans(sent); missing != 0 {
		t.Fatalf("%d of %d spans never arrived: %s\n%s", missing, len(sent), u, g.stderr.String())
	}
	items := float64(len(sent))
	testkit.WaitFor(t, "every span acknowledged", func() bool {
		return scrape(t, g.admin, "otlpgate_client_acknowledged_items_total", `destination="up"`) == items
	})
	spans := u.Spans()
	if len(spans) != len(sent) {
		t.Errorf("upstream holds %d span ids, want exactly the %d sent", len(spans), len(sent))
	}
	for _, id := range sent {
		if spans[id] == 0 {
			t.Errorf("span %x never arrived", id)
		}
	}
	if v := scrape(t, g.admin, "otlpgate_client_dropped_items_total", `destination="up"`); v != 0 {
		t.Errorf("otlpgate_client_dropped_items_total{destination=up} = %v, want 0: the records stayed in the spool", v)
	}
	if v := scrape(t, g.admin, "otlpgate_client_returned_to_spool_items_total", `destination="up"`); v != items {
		t.Errorf("otlpgate_client_returned_to_spool_items_total{destination=up} = %v, want %v: the replaced destination delivered nothing", v, items)
	}
	if v := scrape(t, g.admin, "otlpgate_spool_dropped_records_total"); v != 0 {
		t.Errorf("otlpgate_spool_dropped_records_total = %v, want 0", v)
	}
	g.terminate(t)
	if g.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	checkStopLine(t, g, map[string]string{"lost": "false", "delivered_items": strconv.Itoa(len(sent)),
		"lost_items": "0", "unanswered_items": "0", "spooled_items": "0", "dropped": ""})
	if lines := g.errorLines(); len(lines) != 0 {
		t.Errorf("error lines:\n%s", g.stderr.String())
	}
}

// With the spool, SIGTERM while the upstream holds every answer: what the destination gives up
// at -shutdown.timeout stays in the spool for the next start. It is reported as spooled, not
// as dropped, and nothing is lost (exit status 0).
func TestBinarySpoolShutdownDropsNothing(t *testing.T) {
	bin := buildBinary(t)
	_, g, _, sent := spoolHeldUpstream(t, bin)
	g.terminate(t)
	if g.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	checkStopLine(t, g, map[string]string{"lost": "false", "delivered_items": "0",
		"lost_items": "0", "unanswered_items": "0", "spooled_items": strconv.Itoa(len(sent)), "dropped": ""})
}
