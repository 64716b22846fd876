package uds

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
)

// refuseOnce is a pipeline.Consumer that refuses, with ErrFull, the first payload holding the
// resource of process pid, and records everything else.
type refuseOnce struct {
	*testkit.Recorder
	pid int64

	mu      sync.Mutex
	refused int
}

func (r *refuseOnce) Consume(req pipeline.Request) error {
	r.mu.Lock()
	first := r.refused == 0 && slices.Contains(pidsOf(req.Body), r.pid)
	if first {
		r.refused++
	}
	r.mu.Unlock()
	if first {
		return pipeline.ErrFull
	}
	return r.Recorder.Consume(req)
}

// pidsOf lists the process.pid of every resource of a metrics body, in order.
func pidsOf(body []byte) []int64 {
	var req colmetricsv1.ExportMetricsServiceRequest
	if err := req.UnmarshalVT(body); err != nil {
		return nil
	}
	var out []int64
	for _, rm := range req.ResourceMetrics {
		for _, a := range rm.Resource.GetAttributes() {
			if a.Key == "process.pid" {
				out = append(out, a.Value.GetIntValue())
			}
		}
	}
	return out
}

// feedProcess runs a PHP process's messages through a connection without a socket: init, a
// count view, n records and, with end set, PROC_SHUTDOWN.
func feedProcess(srv *Server, pid uint64, n int, end bool) {
	s := newStream(pid).init().measure("m", ocdaemon.MeasureInt).view("m_count", "m", ocdaemon.AggregationCount)
	for range n {
		s.recordInt("m", 1)
	}
	if end {
		s.add(ocdaemon.ProcShutdown, nil)
	}
	c := newConn(srv)
	c.feed(s.buf)
	if !end {
		return // stays attached: the process lives on
	}
	c.close()
}

func newExportServer(t *testing.T, next pipeline.Consumer, chunk int) *Server {
	t.Helper()
	srv, err := New(DefaultConfig(), next, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.clock = testkit.NewClock(testEpoch)
	srv.chunkBytes = chunk
	return srv
}

// Processes are exported in bounded chunks: a refusal costs only its chunk, and an ended
// process whose final export was refused is kept and exported, exactly once, in the next round.
func TestRefusedChunkKeepsEndedProcess(t *testing.T) {
	rec := &testkit.Recorder{}
	next := &refuseOnce{Recorder: rec, pid: 2}
	srv := newExportServer(t, next, 1) // one process per chunk
	deferred, accepted, full := counter(exportsDeferred), counter(itemsCounters[1][consumeAccepted]), counter(itemsCounters[1][consumeFull])
	feedProcess(srv, 1, 1, true)
	feedProcess(srv, 2, 2, true)
	feedProcess(srv, 3, 3, true)

	now := srv.clock.Now()
	due, _ := srv.reg.due(now, false)
	kept := srv.exportMetrics(due, now, false)
	if len(kept) != 1 || kept[0].pid != 2 {
		t.Fatalf("kept %v, want process 2", kept)
	}
	if dropped := srv.reg.keep(kept); len(dropped) != 0 {
		t.Fatalf("dropped %d", len(dropped))
	}
	var got [][]int64
	for _, p := range rec.Received() {
		got = append(got, pidsOf(p.Body))
	}
	if want := [][]int64{{1}, {3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("first round exported %v, want %v", got, want)
	}

	due, _ = srv.reg.due(now, false)
	if kept := srv.exportMetrics(due, now, false); len(kept) != 0 {
		t.Fatalf("second round kept %d", len(kept))
	}
	due, _ = srv.reg.due(now, false)
	if len(due) != 0 {
		t.Fatalf("%d processes still due after their final export was admitted", len(due))
	}
	points := metricPoints(t, rec.Received())
	for pid, want := range map[int]float64{1: 1, 2: 2, 3: 3} {
		key := []string{"", "1 m_count {}", "2 m_count {}", "3 m_count {}"}[pid]
		if p := points[key]; len(p) != 1 || p[0].value != want {
			t.Errorf("%s: %v, want one point of %v", key, p, want)
		}
	}
	if len(rec.Received()) != 3 {
		t.Errorf("%d payloads, want 3", len(rec.Received()))
	}
	if d := counter(exportsDeferred) - deferred; d != 1 {
		t.Errorf("deferred exports %v, want 1", d)
	}
	if d := counter(itemsCounters[1][consumeAccepted]) - accepted; d != 3 {
		t.Errorf("accepted points %v, want 3", d)
	}
	if d := counter(itemsCounters[1][consumeFull]) - full; d != 0 {
		t.Errorf("points counted as dropped: %v, want 0", d)
	}
}

// A live process refused while running is not retried (its next period reports the same
// cumulative values), but a view it unregistered keeps its final report for that next period.
func TestRefusedLiveProcessKeepsRetiredView(t *testing.T) {
	rec := &testkit.Recorder{}
	next := &refuseOnce{Recorder: rec, pid: 4}
	srv := newExportServer(t, next, exportChunkBytes)
	full := counter(itemsCounters[1][consumeFull])
	s := newStream(4).init().measure("m", ocdaemon.MeasureInt).
		view("a", "m", ocdaemon.AggregationCount).view("b", "m", ocdaemon.AggregationSum).
		recordInt("m", 7).recordInt("m", 5).
		add(ocdaemon.ViewUnregister, ocdaemon.AppendNames(nil, [][]byte{[]byte("b")}))
	c := newConn(srv)
	c.feed(s.buf)
	defer c.close()

	now := srv.clock.Now()
	due, _ := srv.reg.due(now, true)
	if kept := srv.exportMetrics(due, now, false); len(kept) != 0 {
		t.Fatalf("a live process was kept: %v", kept)
	}
	if len(rec.Received()) != 0 {
		t.Fatal("the refused export was recorded")
	}
	if d := counter(itemsCounters[1][consumeFull]) - full; d != 2 {
		t.Errorf("points dropped as full %v, want 2", d)
	}
	due, _ = srv.reg.due(now, true)
	srv.exportMetrics(due, now, false)
	points := metricPoints(t, rec.Received())
	if a, b := points["4 a {}"], points["4 b {}"]; len(a) != 1 || a[0].value != 2 || len(b) != 1 || b[0].value != 12 {
		t.Fatalf("after the refusal: a %v, b %v; want 2 and the retired view's 12", a, b)
	}
}

// At shutdown a refused final export is tried again until admitted: nothing is forgotten while
// Shutdown's context lasts.
func TestShutdownRetriesRefusedFinalExport(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen, cfg.Loops = socketPath(t), 2
	h := &harness{t: t, rec: &testkit.Recorder{}, clock: testkit.NewClock(testEpoch), path: cfg.Listen}
	srv, err := New(cfg, &refuseOnce{Recorder: h.rec, pid: 6}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.clock = h.clock
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.s = srv
	deferred := counter(exportsDeferred)
	records := counter(messagesByType[ocdaemon.StatsRecord])
	c := h.dial()
	s := newStream(6).init().measure("m", ocdaemon.MeasureInt).view("m_count", "m", ocdaemon.AggregationCount).
		recordInt("m", 1).recordInt("m", 1).recordInt("m", 1)
	write(t, c, s.buf, 0)
	waitMessages(t, ocdaemon.StatsRecord, records, 3)
	h.shutdown()
	c.Close()
	got := metricPoints(t, h.rec.Received())
	if p := got["6 m_count {}"]; len(p) != 1 || p[0].value != 3 {
		t.Fatalf("got %v, want one export of 3", got)
	}
	if d := counter(exportsDeferred) - deferred; d != 1 {
		t.Errorf("deferred exports %v, want 1", d)
	}
}
