package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// arrived waits for every acknowledged span to reach u, fails the test on any that never
// arrives or that arrived without ever being sent, and returns the duplicates and the distinct
// spans received.
func arrived(t *testing.T, u *testkit.GRPCSink, acked []uint64, sent map[uint64]bool) (dups, distinct int) {
	t.Helper()
	if n := u.WaitSpans(acked); n > 0 {
		t.Fatalf("%d of %d acknowledged spans never arrived", n, len(acked))
	}
	spans := u.Spans()
	for id := range spans {
		if !sent[id] {
			t.Errorf("span %d arrived but was never sent", id)
		}
	}
	_, dups = u.SpanCount()
	return dups, len(spans)
}

// loader sends trace requests to a gateway over the OTEP unary service and keeps the span ids
// of every request answered Success.
type loader struct {
	mu    sync.Mutex
	gen   *otlpgen.Generator
	shape otlpgen.Shape
	id    uint64
	sent  map[uint64]bool // every span id sent, answered or not
	acked []uint64        // span ids of the requests answered Success, in answer order
}

func newLoader(seed uint64, shape otlpgen.Shape) *loader {
	return &loader{gen: otlpgen.New(seed), shape: shape, sent: map[uint64]bool{}}
}

// next builds the next request and notes its span ids as sent.
func (l *loader) next() (*otepv1.TraceExportRequest, []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.id++
	rs := l.gen.Spans(l.shape).ResourceSpans
	var ids []uint64
	for _, sp := range rs[0].ScopeSpans[0].Spans {
		id := binary.BigEndian.Uint64(sp.SpanId)
		ids = append(ids, id)
		l.sent[id] = true
	}
	return &otepv1.TraceExportRequest{Id: l.id, ResourceSpans: rs}, ids
}

func (l *loader) ack(ids []uint64) {
	l.mu.Lock()
	l.acked = append(l.acked, ids...)
	l.mu.Unlock()
}

func (l *loader) ackedIDs() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.acked...)
}

// run sends from workers goroutines until stop is closed or a call fails for good (the
// gateway died), and returns once they all stopped.
func (l *loader) run(t *testing.T, addr string, workers int, stop <-chan struct{}) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	c := otepv1.NewUnaryExporterClient(conn)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fails := 0; fails < 50; {
				select {
				case <-stop:
					return
				default:
				}
				req, ids := l.next()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := c.ExportTraces(ctx, req, grpc.WaitForReady(true))
				cancel()
				switch {
				case err != nil:
					fails++
					time.Sleep(20 * time.Millisecond)
				case resp.ResultCode == otepv1.ResultCode_Success:
					l.ack(ids)
				default:
					time.Sleep(5 * time.Millisecond) // backpressure: the spool is full
				}
			}
		}()
	}
	wg.Wait()
}

// scrape returns the sum of the samples of metric whose labels contain every one of labels
// (name="value" pairs).
func scrape(t *testing.T, admin, metric string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+" ") && !strings.HasPrefix(line, metric+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}

// waitReady waits until the gateway's /readyz answers 200. The admin listener starts before
// the intakes, so a 503 "not listening" at first only means they are still starting (on a busy
// machine, for a while); a gateway that never gets ready fails the test with its last answer.
func waitReady(t *testing.T, g *gateway) {
	t.Helper()
	var code int
	var body string
	t.Cleanup(func() {
		if t.Failed() && code != http.StatusOK {
			t.Logf("last /readyz: %d %q", code, body)
		}
	})
	testkit.WaitFor(t, "the gateway's /readyz to answer 200", func() bool {
		code, body = readyz(t, g.admin)
		return code == http.StatusOK
	})
}

// spoolGateway starts the binary with the spool in dir, one OTEP destination at upstream and
// only the gRPC intake.
func spoolGateway(t *testing.T, bin, dir, upstream string, extra ...string) *gateway {
	t.Helper()
	args := append([]string{"-http.listen", "", "-spool.dir", dir, "-batch.max-age", "10ms", "-shutdown.timeout", "5s",
		"-dest", "name=up,endpoint=" + upstream + ",protocol=otep,mode=stream,retry-initial=20ms,retry-max=200ms"}, extra...)
	g := startGateway(t, bin, args...)
	waitReady(t, g)
	return g
}

// kill9 kills the gateway with SIGKILL and waits for it.
func kill9(t *testing.T, g *gateway) {
	t.Helper()
	g.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGKILL")
	}
}

// Every span acknowledged before a kill -9, while the upstream was down, reaches the upstream
// once a new process starts on the same spool and the upstream comes up: for each sync mode
// that promises to survive a process crash.
func TestSpoolSurvivesKill9(t *testing.T) {
	bin := buildBinary(t)
	for _, mode := range []string{"always", "interval", "none"} { // each acknowledges after write(2) at least
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			// Nobody listens yet: the upstream is down, and comes up on this address after the
			// restart. A port chosen for a listener that binds later leaves a window in which
			// another process may take it; that is inherent to an upstream that comes back.
			up := testkit.FreeAddr(t)
			g := spoolGateway(t, bin, dir, up, "-spool.sync", mode)

			l := newLoader(1, otlpgen.Shape{Spans: 10, Attrs: 2})
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { l.run(t, g.grpcAddr, 4, stop); close(done) }()
			for deadline := time.Now().Add(30 * time.Second); len(l.ackedIDs()) < 3000; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("only %d spans acknowledged in 30s", len(l.ackedIDs()))
				}
			}
			kill9(t, g) // the load is still running
			close(stop)
			<-done
			acked := l.ackedIDs()

			g2 := spoolGateway(t, bin, dir, up, "-spool.sync", mode)
			u := testkit.StartGRPCSink(t, up)
			dups, distinct := arrived(t, u, acked, l.sent)
			replayed := scrape(t, g2.admin, "otlpgate_spool_replayed_records_total", `destination="up"`)
			t.Logf("sync=%s: %d spans acknowledged before kill -9, %d distinct arrived (%d sent in all), %d duplicates; %v records replayed",
				mode, len(acked), distinct, len(l.sent), dups, replayed)
			if replayed == 0 {
				t.Error("nothing counted as replayed after the restart")
			}
			g2.terminate(t)
			if g2.exitErr != nil {
				t.Errorf("exit: %v\n%s", g2.exitErr, g2.stderr.String())
			}
		})
	}
}

// sendAcked sends n trace requests to the gateway, one at a time, and fails the test unless
// each is answered Success; it returns the span ids sent.
func sendAcked(t *testing.T, g *gateway, l *loader, n int) []uint64 {
	t.Helper()
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := otepv1.NewUnaryExporterClient(conn)
	var all []uint64
	for range n {
		req, ids := l.next()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.ExportTraces(ctx, req)
		cancel()
		if err != nil || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("%v %v", resp, err)
		}
		l.ack(ids)
		all = append(all, ids...)
	}
	return all
}

// A graceful shutdown with the upstream down loses nothing (exit status 0: the spool keeps
// it); the next start delivers it, and after a graceful shutdown with everything delivered,
// the start after that replays nothing and delivers what it is sent.
func TestSpoolGracefulRestart(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	up := testkit.FreeAddr(t) // down for the first start; see TestSpoolSurvivesKill9
	g := spoolGateway(t, bin, dir, up)
	l := newLoader(2, otlpgen.Shape{Spans: 5, Attrs: 2})
	sendAcked(t, g, l, 200)
	g.terminate(t)
	if g.exitErr != nil {
		t.Fatalf("exit with the upstream down: %v\n%s", g.exitErr, g.stderr.String())
	}

	u := testkit.StartGRPCSink(t, up)
	g2 := spoolGateway(t, bin, dir, up)
	if n := u.WaitSpans(l.ackedIDs()); n > 0 {
		t.Fatalf("%d of 1000 spans never arrived", n)
	}
	// Close persists the positions.
	g2.terminate(t)
	if g2.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g2.exitErr, g2.stderr.String())
	}
	first, _ := u.SpanCount()

	// New traffic after the restart: the feeder reads oldest first, so once it arrived any
	// replay of the old records would have been read, and counted, before it.
	g3 := spoolGateway(t, bin, dir, up)
	fresh := sendAcked(t, g3, l, 20)
	if n := u.WaitSpans(fresh); n > 0 {
		t.Fatalf("%d of %d spans sent after the restart never arrived", n, len(fresh))
	}
	if r := scrape(t, g3.admin, "otlpgate_spool_replayed_records_total", `destination="up"`); r != 0 {
		t.Errorf("%v records replayed after a graceful shutdown with everything delivered", r)
	}
	if got, _ := u.SpanCount(); got != first+len(fresh) {
		t.Errorf("upstream got %d spans after the third start, want %d: the %d new ones and no old one again",
			got-first, len(fresh), len(fresh))
	}
	g3.terminate(t)
	if g3.exitErr != nil {
		t.Errorf("exit: %v\n%s", g3.exitErr, g3.stderr.String())
	}
}

// Three starts on one spool, the second idle, as an operator restarts twice in a row: traffic
// delivered and a clean stop; a start with no traffic and a clean stop (it deletes the last,
// finished segment, leaving only the destination's cursor); a start with traffic. Every span
// acknowledged on the third start must reach the upstream, and the spool's files are the
// owner's only.
func TestSpoolThreeStartsSecondIdle(t *testing.T) {
	bin := buildBinary(t)
	dir := filepath.Join(t.TempDir(), "spool")
	u := testkit.StartGRPCSink(t, "")
	up := u.Addr()
	l := newLoader(4, otlpgen.Shape{Spans: 5, Attrs: 2})
	stop := func(g *gateway) {
		t.Helper()
		g.terminate(t)
		if g.exitErr != nil {
			t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
		}
	}

	g := spoolGateway(t, bin, dir, up, "-spool.sync", "always")
	first := sendAcked(t, g, l, 100)
	if n := u.WaitSpans(first); n > 0 {
		t.Fatalf("first start: %d of %d spans never arrived", n, len(first))
	}
	stop(g)

	stop(spoolGateway(t, bin, dir, up, "-spool.sync", "always"))

	g = spoolGateway(t, bin, dir, up, "-spool.sync", "always")
	// A spool holding only cursors owes nothing: its oldest unfinished age stays 0 (it used
	// to grow from the start on, 0 bytes on disk, a false alert). Checked once the process
	// has run two seconds, past the gauge's resolution.
	testkit.WaitFor(t, "the third start to have run 2 s", func() bool {
		started := scrape(t, g.admin, "process_start_time_seconds")
		return started > 0 && float64(time.Now().Unix())-started >= 3
	})
	if age, bytes := scrape(t, g.admin, "otlpgate_spool_oldest_unfinished_age_seconds"), scrape(t, g.admin, "otlpgate_spool_bytes"); age != 0 {
		t.Errorf("third start, %v bytes spooled, nothing owed: oldest unfinished age %v s, want 0", bytes, age)
	}
	third := sendAcked(t, g, l, 100)
	if n := u.WaitSpans(third); n > 0 {
		t.Fatalf("third start: %d of %d acknowledged spans never arrived (spool: %v segments created, %v deleted as finished)",
			n, len(third), scrape(t, g.admin, "otlpgate_spool_segments_created_total"),
			scrape(t, g.admin, "otlpgate_spool_segments_deleted_total", `reason="finished"`))
	}
	stop(g)
	for id := range u.Spans() {
		if !l.sent[id] {
			t.Errorf("span %d arrived but was never sent", id)
		}
	}

	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string, want os.FileMode) {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s has mode %04o, want %04o", path, got, want)
		}
	}
	check(dir, 0o700)
	for _, e := range ents {
		check(filepath.Join(dir, e.Name()), 0o600)
	}
}

// vmHWM reads the peak resident set of a process, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

var errNoProc = errors.New("no /proc")

// A long outage: far more than -queue.max-bytes is spooled while the upstream is down; the
// heap stays within a bound set by -queue.max-bytes, not by the spool; the destination holds
// no more than -queue.max-bytes of records (and the batch being built) in memory; once the
// upstream is up everything arrives, oldest first beyond what memory held.
func TestSpoolLongOutageBoundedMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip(errNoProc)
	}
	const (
		queueMax = 4 << 20
		batchMax = 256 << 10
		spooled  = 40 << 20
		// liveBound is what the process may keep alive: the destination's share of
		// -queue.max-bytes, the pools' spare buffers and the runtime, gRPC and metrics (10.4
		// MiB measured, idle machine or loaded). It is well below what is spooled, and is the
		// bound that matters: the heap in use also holds garbage, which GOGC lets reach the
		// live size and a loaded machine's late GC cycles somewhat past it (25.4 MiB seen at
		// load 16), so heapBound only catches a heap that grows with the spool.
		liveBound = 16 << 20
		heapBound = 32 << 20
	)
	bin := buildBinary(t)
	dir := t.TempDir()
	up := testkit.FreeAddr(t) // down until the end; see TestSpoolSurvivesKill9
	g := spoolGateway(t, bin, dir, up, "-spool.sync", "none", "-queue.max-bytes", strconv.Itoa(queueMax), "-batch.max-bytes", strconv.Itoa(batchMax),
		"-spool.segment-bytes", "8MiB")
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := otepv1.NewUnaryExporterClient(conn)
	l := newLoader(3, otlpgen.Shape{Spans: 200, Attrs: 10})
	var reqIDs [][]uint64 // span ids of each request, in append order (one sender)
	peakHeap, peakLive := 0.0, 0.0
	for i := 0; scrape(t, g.admin, "otlpgate_spool_appended_bytes_total") < spooled; i++ {
		if i > 20000 {
			t.Fatal("never spooled enough")
		}
		for range 20 {
			req, ids := l.next()
			resp, err := c.ExportTraces(context.Background(), req)
			if err != nil || resp.ResultCode != otepv1.ResultCode_Success {
				t.Fatalf("%v %v", resp, err)
			}
			l.ack(ids)
			reqIDs = append(reqIDs, ids)
		}
		peakHeap = max(peakHeap, scrape(t, g.admin, "go_memstats_heap_inuse_bytes"))
		peakLive = max(peakLive, scrape(t, g.admin, "go_gc_heap_live_bytes"))
	}
	if os.Getenv("SPOOL_HEAP_PROFILE") != "" {
		resp, err := http.Get("http://" + g.admin + "/debug/pprof/heap")
		if err == nil {
			f, _ := os.Create(os.Getenv("SPOOL_HEAP_PROFILE"))
			f.ReadFrom(resp.Body)
			f.Close()
			resp.Body.Close()
		}
	}
	hwm := vmHWM(t, g.cmd.Process.Pid)
	onDisk := scrape(t, g.admin, "otlpgate_spool_bytes")
	t.Logf("spooled %.1f MiB (%d requests) with the upstream down and -queue.max-bytes=4MiB: heap in use peaked at %.1f MiB, live heap at %.1f MiB, VmHWM %.1f MiB",
		onDisk/(1<<20), len(reqIDs), peakHeap/(1<<20), peakLive/(1<<20), float64(hwm)/(1<<20))
	if peakLive > liveBound || peakLive == 0 {
		t.Errorf("live heap reached %.1f MiB, bound %d MiB", peakLive/(1<<20), liveBound>>20)
	}
	if peakHeap > heapBound {
		t.Errorf("heap in use reached %.1f MiB, bound %d MiB", peakHeap/(1<<20), heapBound>>20)
	}
	if onDisk < spooled {
		t.Errorf("spool holds %v bytes, want at least %d", onDisk, spooled)
	}

	// What memory held during the outage: the records the feeder read (each request is one
	// record, read in append order) before the upstream came up. Nothing finishes while the
	// upstream is down, so the feeder stays at its share of -queue.max-bytes and the count
	// stays put until the sink starts.
	inMemory := int(scrape(t, g.admin, "otlpgate_spool_reads_total", `source="memory"`) +
		scrape(t, g.admin, "otlpgate_spool_reads_total", `source="disk"`))
	reqBytes := onDisk / float64(len(reqIDs))
	// The feeder's share, one batch past it and the batch being built, and a request's
	// rounding at each end: a feeder that read past its share would exempt more from the
	// order below, so this is held too.
	if limit := int((queueMax+2*batchMax)/reqBytes) + 2; inMemory > limit || inMemory == 0 {
		t.Errorf("the destination held %d records (%.1f MiB) in memory during the outage, want 1..%d (-queue.max-bytes and a batch)",
			inMemory, float64(inMemory)*reqBytes/(1<<20), limit)
	}

	u := testkit.StartGRPCSink(t, up)
	if n := u.WaitSpans(l.ackedIDs()); n > 0 {
		t.Fatalf("%d of %d spans never arrived", n, len(l.ackedIDs()))
	}
	// Oldest first beyond what memory held: the records the destination held during the outage
	// may come in any order, and as late as they like (a lane still waiting out its backoff to
	// reconnect when the upstream came up sends the batch it holds only then, after the other
	// lane delivered whatever the feeder read meanwhile); a record that was on disk only comes
	// in append order, give or take what memory holds at a time. So a request the feeder read
	// after the upstream came up must have all its spans arrive before those of any request
	// appended more than memWindow requests later.
	order := u.FirstArrivals()
	rank := make(map[uint64]int, len(order))
	for i, id := range order {
		rank[id] = i
	}
	memWindow := int(2*queueMax/reqBytes) + 1
	last := make([]int, len(reqIDs)) // latest first arrival among the request's spans
	for i, ids := range reqIDs {
		for _, id := range ids {
			last[i] = max(last[i], rank[id])
		}
	}
	late := 0
	var lateOnes []string
	for i := inMemory; i < len(reqIDs); i++ {
		for j := i + memWindow; j < len(reqIDs) && j < i+memWindow+50; j++ {
			if rank[reqIDs[j][0]] < last[i] {
				if late++; late <= 5 {
					lateOnes = append(lateOnes, fmt.Sprintf("%d after %d", i, j))
				}
				break
			}
		}
	}
	if late > 0 {
		t.Errorf("%d requests read from the spool after the upstream came up arrived after requests appended more than %d requests later (the first %d of %d were in memory): %s",
			late, memWindow, inMemory, len(reqIDs), strings.Join(lateOnes, ", "))
	}
	t.Logf("%d of %d requests were in memory when the upstream came up; the others arrived in append order within %d requests",
		inMemory, len(reqIDs), memWindow)
	g.terminate(t)
	if g.exitErr != nil {
		t.Errorf("exit: %v", g.exitErr)
	}
}
