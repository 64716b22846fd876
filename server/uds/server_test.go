package uds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// stream builds the bytes one client process writes.
type stream struct {
	pid  uint64
	seq  uint64
	time float64
	f32  bool
	buf  []byte
}

func newStream(pid uint64) *stream { return &stream{pid: pid, time: 1795262752.5} }

func (s *stream) add(t ocdaemon.Type, payload []byte) *stream {
	s.seq++
	s.time += 0.001
	s.buf = ocdaemon.AppendFrame(s.buf, ocdaemon.Header{Type: t, Seq: s.seq, PID: s.pid, Time: s.time, Float32: s.f32}, payload)
	return s
}

func (s *stream) init() *stream {
	return s.add(ocdaemon.ReqInit, ocdaemon.AppendInit(nil, &ocdaemon.Init{ProtocolVersion: 1, PHPVersion: []byte("8.3.1"), ZendVersion: []byte("4.3.1")}))
}

func (s *stream) measure(name string, typ ocdaemon.MeasureType) *stream {
	return s.add(ocdaemon.MeasureCreate, ocdaemon.AppendMeasure(nil, &ocdaemon.Measure{Type: typ, Name: []byte(name), Description: []byte("d"), Unit: []byte("ms")}))
}

func (s *stream) view(name, measure string, agg ocdaemon.Aggregation, keys ...string) *stream {
	v := ocdaemon.View{Name: []byte(name), Description: []byte("v"), Measure: []byte(measure), Aggregation: agg}
	for _, k := range keys {
		v.TagKeys = append(v.TagKeys, []byte(k))
	}
	if agg == ocdaemon.AggregationDistribution {
		v.Bounds = []float64{10, 100}
	}
	return s.add(ocdaemon.ViewRegister, ocdaemon.AppendViews(nil, []ocdaemon.View{v}))
}

func (s *stream) recordInt(measure string, v uint64, tags ...string) *stream {
	r := ocdaemon.Record{Measurements: []ocdaemon.Measurement{{Name: []byte(measure), Type: ocdaemon.MeasureInt, Int: v}}}
	for i := 0; i+1 < len(tags); i += 2 {
		r.Tags = append(r.Tags, ocdaemon.Tag{Key: []byte(tags[i]), Value: []byte(tags[i+1])})
	}
	return s.add(ocdaemon.StatsRecord, ocdaemon.AppendRecord(nil, &r))
}

func (s *stream) spans(names ...string) *stream {
	var b strings.Builder
	b.WriteString("[")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"%x","parentSpanId":null,"name":%q,"kind":"SERVER","stackTrace":[],"startTime":{"date":"2026-11-21 12:05:52.537641","timezone_type":3,"timezone":"UTC"},"endTime":{"date":"2026-11-21 12:05:52.537829","timezone_type":3,"timezone":"UTC"},"status":null,"attributes":[],"timeEvents":[],"links":[],"sameProcessAsParentSpan":false}`, s.seq+1, n)
	}
	b.WriteString("]")
	return s.add(ocdaemon.TraceExport, []byte(b.String()))
}

// point is one decoded metric data point.
type point struct {
	value float64
	start uint64
	time  uint64
}

// metricPoints decodes every metrics payload into "pid name attrs" -> points, in export order.
func metricPoints(t testing.TB, payloads []testkit.Received) map[string][]point {
	t.Helper()
	out := make(map[string][]point)
	for _, p := range payloads {
		if p.Signal != fastpath.Metrics {
			continue
		}
		var req colmetricsv1.ExportMetricsServiceRequest
		if err := req.UnmarshalVT(p.Body); err != nil {
			t.Fatal(err)
		}
		for _, rm := range req.ResourceMetrics {
			var pid int64
			for _, a := range rm.Resource.Attributes {
				if a.Key == "process.pid" {
					pid = a.Value.GetIntValue()
				}
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					add := func(attrs string, pt point) {
						k := fmt.Sprintf("%d %s %s", pid, m.Name, attrs)
						out[k] = append(out[k], pt)
					}
					var nps []*metricsv1.NumberDataPoint
					switch d := m.Data.(type) {
					case *metricsv1.Metric_Sum:
						nps = d.Sum.DataPoints
					case *metricsv1.Metric_Gauge:
						nps = d.Gauge.DataPoints
					case *metricsv1.Metric_Histogram:
						for _, dp := range d.Histogram.DataPoints {
							add(attrString(dp.Attributes), point{float64(dp.Count), dp.StartTimeUnixNano, dp.TimeUnixNano})
						}
					}
					for _, dp := range nps {
						v := dp.GetAsDouble()
						if _, ok := dp.Value.(*metricsv1.NumberDataPoint_AsInt); ok {
							v = float64(dp.GetAsInt())
						}
						add(attrString(dp.Attributes), point{v, dp.StartTimeUnixNano, dp.TimeUnixNano})
					}
				}
			}
		}
	}
	return out
}

func attrString(kvs []*commonv1.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		var v any
		switch x := kv.Value.Value.(type) {
		case *commonv1.AnyValue_StringValue:
			v = x.StringValue
		case *commonv1.AnyValue_BoolValue:
			v = x.BoolValue
		case *commonv1.AnyValue_IntValue:
			v = x.IntValue
		}
		parts = append(parts, fmt.Sprintf("%s=%v", kv.Key, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// spanNames decodes every traces payload into pid -> span names, in consumption order.
func spanNames(t testing.TB, payloads []testkit.Received) map[int64][]string {
	t.Helper()
	out := make(map[int64][]string)
	for _, p := range payloads {
		if p.Signal != fastpath.Traces {
			continue
		}
		var req coltracev1.ExportTraceServiceRequest
		if err := req.UnmarshalVT(p.Body); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.ResourceSpans {
			var pid int64
			for _, a := range rs.Resource.Attributes {
				if a.Key == "process.pid" {
					pid = a.Value.GetIntValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					out[pid] = append(out[pid], sp.Name)
				}
			}
		}
	}
	return out
}

// waitMessages waits until the server handled n more messages of type t than before.
func waitMessages(t testing.TB, typ ocdaemon.Type, before float64, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d %s messages", n, typ), func() bool {
		return counter(messagesByType[typ]) >= before+float64(n)
	})
}

func TestPartialMessage(t *testing.T) {
	data := readFile(t, "partial_message.bin")
	truncated := counter(discarded[ocdaemon.ReasonTruncated])
	records := counter(messagesByType[ocdaemon.StatsRecord])
	noView := counter(statsRejected[rejectNoView])

	h := start(t, nil)
	h.replay(data, 4096)
	h.shutdown()
	if d := counter(discarded[ocdaemon.ReasonTruncated]) - truncated; d != 1 {
		t.Errorf("truncated messages: %v, want 1", d)
	}
	if d := counter(messagesByType[ocdaemon.StatsRecord]) - records; d != 1 {
		t.Errorf("stats records after the truncation: %v, want 1", d)
	}
	// The capture registers no view: OpenCensus drops such measurements, and so do we, counted.
	if d := counter(statsRejected[rejectNoView]) - noView; d != 1 {
		t.Errorf("measurements without a view: %v, want 1", d)
	}

	// Splice a view registration in after the capture's MEASURE_CREATE (offset 76): the record
	// that follows the truncated trace export then shows up in the metrics.
	view := newStream(31153)
	view.seq = 2
	view.view("partial/sum", "partial/count", ocdaemon.AggregationSum)
	spliced := append(append(append([]byte(nil), data[:76]...), view.buf...), data[76:]...)
	for _, chunk := range []int{0, 1000, 4096} {
		h := start(t, nil)
		h.replay(spliced, chunk)
		h.shutdown()
		got := metricPoints(t, h.rec.Received())
		want := point{value: 7, start: 1795262753453380000, time: uint64(testEpoch.UnixNano())}
		if pts := got["31153 partial/sum {}"]; len(pts) != 1 || pts[0] != want {
			t.Fatalf("chunk %d: got %v, want one point %v", chunk, got, want)
		}
	}
}

func TestReportingPeriod(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	defer c.Close()
	records := counter(messagesByType[ocdaemon.StatsRecord])
	s := newStream(77).init().measure("m", ocdaemon.MeasureInt).
		add(ocdaemon.ViewReportingPeriod, ocdaemon.AppendReportingPeriod(nil, 2.5)).
		view("m_count", "m", ocdaemon.AggregationCount).view("m_sum", "m", ocdaemon.AggregationSum).
		recordInt("m", 5).recordInt("m", 5)
	write(t, c, s.buf, 0)
	waitMessages(t, ocdaemon.StatsRecord, records, 2)

	epoch := testEpoch
	exportAt := func(at time.Duration, wantPayloads int) map[string][]point {
		t.Helper()
		testkit.WaitFor(t, "the exporter to wait for "+at.String(), func() bool { return h.clock.WaitingAt(epoch.Add(at)) })
		h.clock.Advance(epoch.Add(at).Sub(h.clock.Now()))
		testkit.WaitFor(t, "an export", func() bool { return len(h.rec.Received()) == wantPayloads })
		return metricPoints(t, h.rec.Received())
	}
	at := func(d time.Duration) uint64 { return uint64(epoch.Add(d).UnixNano()) }

	got := exportAt(2500*time.Millisecond, 1)
	if p := got["77 m_count {}"]; len(p) != 1 || p[0].value != 2 || p[0].time != at(2500*time.Millisecond) {
		t.Fatalf("first export: %v", got)
	}
	if p := got["77 m_sum {}"]; len(p) != 1 || p[0].value != 10 {
		t.Fatalf("first export: %v", got)
	}

	s.buf = nil
	s.recordInt("m", 5).add(ocdaemon.ViewUnregister, ocdaemon.AppendNames(nil, [][]byte{[]byte("m_sum")}))
	unreg := counter(messagesByType[ocdaemon.ViewUnregister])
	write(t, c, s.buf, 0)
	waitMessages(t, ocdaemon.ViewUnregister, unreg, 1)

	got = exportAt(5*time.Second, 2)
	if p := got["77 m_sum {}"]; len(p) != 2 || p[1].value != 15 || p[1].start != p[0].start {
		t.Fatalf("second export: the unregistered view's final report is missing: %v", got)
	}
	got = exportAt(7500*time.Millisecond, 3)
	if p := got["77 m_sum {}"]; len(p) != 2 {
		t.Fatalf("third export: the unregistered view still reports: %v", got)
	}
	if p := got["77 m_count {}"]; len(p) != 3 || p[2].value != 3 || p[2].start != p[0].start {
		t.Fatalf("third export: %v", got)
	}
}

func TestProcShutdownExportsAtOnce(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	defer c.Close()
	s := newStream(88).add(ocdaemon.ProcInit, nil).measure("m", ocdaemon.MeasureInt).
		view("m_last", "m", ocdaemon.AggregationLastValue).recordInt("m", 4).recordInt("m", 9).
		add(ocdaemon.ProcShutdown, nil)
	write(t, c, s.buf, 0)
	// The connection stays open: PROC_SHUTDOWN alone ends the process and flushes it.
	testkit.WaitFor(t, "the final export", func() bool { return len(h.rec.Received()) == 1 })
	got := metricPoints(t, h.rec.Received())
	if p := got["88 m_last {}"]; len(p) != 1 || p[0].value != 9 {
		t.Fatalf("got %v", got)
	}
	if n := h.s.reg.live(); n != 0 {
		t.Fatalf("%d live processes after PROC_SHUTDOWN", n)
	}
}

func TestShutdownFlushes(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	records := counter(messagesByType[ocdaemon.StatsRecord])
	s := newStream(99).init().measure("m", ocdaemon.MeasureInt).
		view("m_dist", "m", ocdaemon.AggregationDistribution, "k").
		recordInt("m", 5, "k", "a").recordInt("m", 50, "k", "a").recordInt("m", 500, "k", "b")
	write(t, c, s.buf, 0)
	waitMessages(t, ocdaemon.StatsRecord, records, 3)
	h.shutdown()
	c.Close()
	got := metricPoints(t, h.rec.Received())
	if a, b := got["99 m_dist {k=a}"], got["99 m_dist {k=b}"]; len(a) != 1 || a[0].value != 2 || len(b) != 1 || b[0].value != 1 {
		t.Fatalf("got %v", got)
	}
	if _, err := os.Lstat(h.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after shutdown: %v", err)
	}
}

func TestSeriesOverflow(t *testing.T) {
	overflow := counter(seriesOverflow)
	h := start(t, func(c *Config) { c.MaxSeries = 2 })
	s := newStream(5).init().measure("m", ocdaemon.MeasureInt).view("m_count", "m", ocdaemon.AggregationCount, "k")
	for _, v := range []string{"a", "b", "c", "d", "a", "c"} {
		s.recordInt("m", 1, "k", v)
	}
	h.replay(s.buf, 0)
	h.shutdown()
	var keys []string
	for k, p := range metricPoints(t, h.rec.Received()) {
		keys = append(keys, fmt.Sprintf("%s:%v", k, p[0].value))
	}
	sort.Strings(keys)
	// The first two tag sets get series; c, d and the second c go to the overflow series.
	want := []string{"5 m_count {k=a}:2", "5 m_count {k=b}:1", "5 m_count {otel.metric.overflow=true}:3"}
	if !slices.Equal(keys, want) {
		t.Fatalf("got %v, want %v", keys, want)
	}
	if d := counter(seriesOverflow) - overflow; d != 3 {
		t.Fatalf("overflow counted %v, want 3", d)
	}
}

func TestConsumerRejectionsAreCounted(t *testing.T) {
	full := counter(itemsCounters[0][consumeFull])
	tooLarge := counter(itemsCounters[1][consumeTooLarge])
	h := start(t, nil)
	h.rec.SetErr(pipeline.ErrFull)
	s := newStream(7).init().spans("a", "b", "c")
	h.replay(s.buf, 0)
	h.rec.SetErr(pipeline.ErrTooLarge)
	s = newStream(8).init().measure("m", ocdaemon.MeasureInt).view("v", "m", ocdaemon.AggregationCount).recordInt("m", 1)
	h.replay(s.buf, 0)
	h.shutdown()
	if d := counter(itemsCounters[0][consumeFull]) - full; d != 3 {
		t.Errorf("spans dropped as full: %v, want 3", d)
	}
	if d := counter(itemsCounters[1][consumeTooLarge]) - tooLarge; d != 1 {
		t.Errorf("points dropped as too large: %v, want 1", d)
	}
}

func TestFloat32Headers(t *testing.T) {
	h := start(t, nil)
	s := newStream(9)
	s.f32 = true
	s.init().spans("f32")
	h.replay(s.buf, 3)
	h.shutdown()
	if got := spanNames(t, h.rec.Received()); len(got[9]) != 1 || got[9][0] != "f32" {
		t.Fatalf("got %v", got)
	}
}

// TestConcurrentConnections runs 64 client processes at once: nothing may be lost, and each
// connection's messages must be applied in order.
func TestConcurrentConnections(t *testing.T) {
	const conns, perConn = 64, 40
	h := start(t, func(c *Config) { c.Loops = 4 })
	streams := make([][]byte, conns)
	for i := range conns {
		s := newStream(uint64(1000+i)).init().measure("seq", ocdaemon.MeasureInt).
			view("seq_last", "seq", ocdaemon.AggregationLastValue).view("seq_count", "seq", ocdaemon.AggregationCount)
		for j := range perConn {
			s.recordInt("seq", uint64(j)).spans(fmt.Sprintf("c%d-%d", i, j))
		}
		streams[i] = s.buf
	}
	closed := h.s.closed.Load()
	var wg sync.WaitGroup
	for i := range conns {
		c := h.dial()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			chunk := []int{1, 7, 100, 4096}[i%4]
			for off := 0; off < len(streams[i]); off += chunk {
				if _, err := c.Write(streams[i][off:min(off+chunk, len(streams[i]))]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testkit.WaitFor(t, "all connections to close", func() bool { return h.s.closed.Load() == closed+conns })
	h.shutdown()

	payloads := h.rec.Received()
	names := spanNames(t, payloads)
	points := metricPoints(t, payloads)
	for i := range conns {
		pid := int64(1000 + i)
		got := names[pid]
		if len(got) != perConn {
			t.Fatalf("pid %d: %d spans, want %d", pid, len(got), perConn)
		}
		for j, n := range got {
			if want := fmt.Sprintf("c%d-%d", i, j); n != want {
				t.Fatalf("pid %d: span %d is %s, want %s (reordered)", pid, j, n, want)
			}
		}
		if p := points[fmt.Sprintf("%d seq_last {}", pid)]; len(p) != 1 || p[0].value != perConn-1 {
			t.Fatalf("pid %d: last value %v, want %d", pid, p, perConn-1)
		}
		if p := points[fmt.Sprintf("%d seq_count {}", pid)]; len(p) != 1 || p[0].value != perConn {
			t.Fatalf("pid %d: count %v, want %d", pid, p, perConn)
		}
	}
}

func TestSocketLifecycle(t *testing.T) {
	t.Run("stale socket is replaced", func(t *testing.T) {
		path := socketPath(t)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close()
		h := start(t, func(c *Config) { c.Listen = path })
		h.replay(newStream(1).init().spans("x").buf, 0)
		h.shutdown()
		if len(h.rec.Received()) != 1 {
			t.Fatal("no spans through the replaced socket")
		}
	})
	t.Run("the path shows only a ready socket", func(t *testing.T) {
		for _, stale := range []bool{false, true} {
			path := socketPath(t)
			var staleFile os.FileInfo
			if stale {
				ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				ln.SetUnlinkOnClose(false)
				ln.Close()
				if staleFile, err = os.Lstat(path); err != nil {
					t.Fatal(err)
				}
			}
			ran := false
			testBeforePublish = func(tmp string) {
				ran = true
				if fi, err := os.Lstat(tmp); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
					t.Errorf("stale %v: before it is moved, %s is %v (%v), want a socket with mode 0600", stale, tmp, fi, err)
				}
				if c, err := net.Dial("unix", tmp); err != nil {
					t.Errorf("stale %v: not listening before it is moved: %v", stale, err)
				} else {
					c.Close()
				}
				fi, err := os.Lstat(path)
				switch {
				case stale && (err != nil || !os.SameFile(fi, staleFile)):
					t.Errorf("before the move, the path holds %v (%v), want the stale socket", fi, err)
				case !stale && !errors.Is(err, os.ErrNotExist):
					t.Errorf("before the move, the path holds %v (%v), want nothing", fi, err)
				}
			}
			t.Cleanup(func() { testBeforePublish = nil })
			h := start(t, func(c *Config) { c.Listen, c.Mode = path, 0o600 })
			testBeforePublish = nil
			if !ran {
				t.Fatal("the socket was never published through publishSocket")
			}
			if _, err := os.Lstat(tempSocketPath(path)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the temporary name is left: %v", err)
			}
			if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 || (stale && os.SameFile(fi, staleFile)) {
				t.Fatalf("after Start the path holds %v (%v)", fi, err)
			}
			// The probe's connection is accepted and closed once the socket is published; replay
			// waits for the next close.
			testkit.WaitFor(t, "the probe's close", func() bool { return h.s.closed.Load() >= 1 })
			h.replay(newStream(1).init().spans("ready").buf, 0)
			h.shutdown()
			if got := spanNames(t, h.rec.Received())[1]; len(got) != 1 || got[0] != "ready" {
				t.Fatalf("spans %v", got)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("socket file after shutdown: %v", err)
			}
		}
	})
	t.Run("a socket that took the path while serving is left alone", func(t *testing.T) {
		h := start(t, nil)
		if err := os.Remove(h.path); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("unix", h.path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		h.shutdown()
		if c, err := net.Dial("unix", h.path); err != nil {
			t.Fatalf("shutdown removed the socket that took its path: %v", err)
		} else {
			c.Close()
		}
	})
	t.Run("live socket is an error", func(t *testing.T) {
		path := socketPath(t)
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cfg := DefaultConfig()
		cfg.Listen = path
		s, err := New(cfg, &testkit.Recorder{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "another process") {
			t.Fatalf("Start on a live socket: %v", err)
		}
		if c, err := net.Dial("unix", path); err != nil {
			t.Fatalf("the other process's socket was disturbed: %v", err)
		} else {
			c.Close()
		}
	})
	t.Run("a file that is not a socket is left alone", func(t *testing.T) {
		path := socketPath(t)
		if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.Listen = path
		s, _ := New(cfg, &testkit.Recorder{}, nil)
		if err := s.Start(context.Background()); err == nil {
			t.Fatal("Start over a regular file succeeded")
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
			t.Fatalf("file changed: %q %v", b, err)
		}
	})
	t.Run("mode", func(t *testing.T) {
		for _, mode := range []os.FileMode{0o660, 0o600, 0o666} {
			h := start(t, func(c *Config) { c.Mode = mode })
			fi, err := os.Stat(h.path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != mode {
				t.Fatalf("mode %v, want socket %v", fi.Mode(), mode)
			}
			h.shutdown()
		}
	})
	t.Run("relative path", func(t *testing.T) {
		dir := filepath.Dir(socketPath(t))
		t.Chdir(dir)
		h := start(t, func(c *Config) { c.Listen = "oc b.sock" })
		h.path = filepath.Join(dir, "oc b.sock")
		h.replay(newStream(1).init().spans("rel").buf, 0)
		h.shutdown()
		if got := spanNames(t, h.rec.Received())[1]; len(got) != 1 {
			t.Fatalf("spans %v", got)
		}
	})
	t.Run("empty listen turns the intake off", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Listen = ""
		s, err := New(cfg, &testkit.Recorder{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMaxConnections(t *testing.T) {
	rejected := counter(connectionsRejected)
	h := start(t, func(c *Config) { c.MaxConnections = 1 })
	first := h.dial()
	defer first.Close()
	// Once a message through it came out, the first connection surely was accepted.
	write(t, first, newStream(1).init().spans("first").buf, 0)
	testkit.WaitFor(t, "the first connection's spans", func() bool { return len(h.rec.Received()) == 1 })
	second := h.dial()
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := second.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("second connection: read %v, want EOF from the server closing it", err)
	}
	if d := counter(connectionsRejected) - rejected; d != 1 {
		t.Fatalf("rejected %v, want 1", d)
	}
}

func TestConfigValidate(t *testing.T) {
	f := func(name string, edit func(*Config), ok bool) {
		t.Helper()
		c := DefaultConfig()
		edit(&c)
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
	f("defaults", func(c *Config) {}, true)
	f("off", func(c *Config) { c.Listen = ""; c.MaxSeries = 0 }, true)
	f("long path", func(c *Config) { c.Listen = "/" + strings.Repeat("x", 200) }, false)
	f("url characters", func(c *Config) { c.Listen = "/tmp/a#b" }, false)
	f("mode bits", func(c *Config) { c.Mode = os.ModeSetuid | 0o600 }, false)
	f("loops", func(c *Config) { c.Loops = -1 }, false)
	f("engine net", func(c *Config) { c.Engine = EngineNet }, true)
	f("unknown engine", func(c *Config) { c.Engine = "epoll" }, false)
	f("no engine", func(c *Config) { c.Engine = "" }, false)
	f("max message", func(c *Config) { c.MaxMessageBytes = 0 }, false)
	f("series", func(c *Config) { c.MaxSeries = 0 }, false)
	f("period", func(c *Config) { c.DefaultReportingPeriod = time.Millisecond }, false)
	f("negative idle timeout", func(c *Config) { c.IdleTimeout = -time.Second }, false)
	f("negative read timeout", func(c *Config) { c.ReadTimeout = -time.Second }, false)
	f("timeouts off", func(c *Config) { c.IdleTimeout, c.ReadTimeout = 0, 0 }, true)
	if _, err := New(DefaultConfig(), nil, slog.Default()); err == nil {
		t.Error("New with a nil consumer succeeded")
	}
}

// TestNegativeIntRecord sends what the client writes for a measurement of -1 (the lone byte
// 0xff): that record is rejected, the connection and the records after it are kept.
func TestNegativeIntRecord(t *testing.T) {
	undecodable := counter(discarded[ocdaemon.ReasonUndecodable])
	h := start(t, nil)
	s := newStream(11).init().measure("m", ocdaemon.MeasureInt).view("m_sum", "m", ocdaemon.AggregationSum).
		recordInt("m", 4).
		add(ocdaemon.StatsRecord, []byte{1, 1, 'm', byte(ocdaemon.MeasureInt), 0xff, 0, 0}).
		recordInt("m", 6)
	h.replay(s.buf, 0)
	h.shutdown()
	if p := metricPoints(t, h.rec.Received())["11 m_sum {}"]; len(p) != 1 || p[0].value != 10 {
		t.Fatalf("sum %v, want 10 from the two valid records", p)
	}
	if d := counter(discarded[ocdaemon.ReasonUndecodable]) - undecodable; d != 1 {
		t.Fatalf("undecodable %v, want 1", d)
	}
}

func TestMaxMessageBytes(t *testing.T) {
	tooLarge := counter(discarded[ocdaemon.ReasonTooLarge])
	h := start(t, func(c *Config) { c.MaxMessageBytes = 600 })
	s := newStream(12).init().spans("small").spans("a", "b", "c", "d", "e", "f").spans("after")
	h.replay(s.buf, 0)
	h.shutdown()
	if got := spanNames(t, h.rec.Received())[12]; !slices.Equal(got, []string{"small", "after"}) {
		t.Fatalf("spans %v", got)
	}
	if d := counter(discarded[ocdaemon.ReasonTooLarge]) - tooLarge; d != 1 {
		t.Fatalf("too large %v, want 1", d)
	}
}

// -uds.max-series-total caps the series of all processes together; a process whose final export
// was admitted gives its series back at the exporter's next round.
func TestSeriesTotalCap(t *testing.T) {
	overflow := counter(seriesGlobalOverflow)
	h := start(t, func(c *Config) { c.MaxSeries = 10; c.MaxSeriesTotal = 3 })
	// Connections held open keep their processes alive: the last one to close ends a process.
	ca, cb := h.dial(), h.dial()
	a := newStream(5).init().measure("m", ocdaemon.MeasureInt).view("m_count", "m", ocdaemon.AggregationCount, "k")
	a.recordInt("m", 1, "k", "a").recordInt("m", 1, "k", "b")
	write(t, ca, a.buf, 0)
	testkit.WaitFor(t, "process 5's two series", func() bool { return h.s.limits.budget.n.Load() == 2 })
	b := newStream(6).init().measure("m", ocdaemon.MeasureInt).view("m_count", "m", ocdaemon.AggregationCount, "k")
	b.recordInt("m", 1, "k", "c").recordInt("m", 1, "k", "d").recordInt("m", 1, "k", "e")
	write(t, cb, b.buf, 0)
	testkit.WaitFor(t, "d and e in the overflow series", func() bool { return counter(seriesGlobalOverflow)-overflow == 2 })
	// Process 5 ends; once its final export is admitted its two series are free again.
	ca.Close()
	testkit.WaitFor(t, "process 5's series given back", func() bool { return h.s.limits.budget.n.Load() == 1 })
	c := newStream(7).init().measure("m", ocdaemon.MeasureInt).view("m_count", "m", ocdaemon.AggregationCount, "k")
	c.recordInt("m", 1, "k", "f").recordInt("m", 1, "k", "g")
	h.replay(c.buf, 0)
	cb.Close()
	h.shutdown()
	if d := counter(seriesGlobalOverflow) - overflow; d != 2 {
		t.Fatalf("global overflow counted %v after the recount, want still 2", d)
	}
	var keys []string
	for k, p := range metricPoints(t, h.rec.Received()) {
		keys = append(keys, fmt.Sprintf("%s:%v", k, p[0].value))
	}
	sort.Strings(keys)
	want := []string{"5 m_count {k=a}:1", "5 m_count {k=b}:1", "6 m_count {k=c}:1", "6 m_count {otel.metric.overflow=true}:2",
		"7 m_count {k=f}:1", "7 m_count {k=g}:1"}
	if !slices.Equal(keys, want) {
		t.Fatalf("got %v, want %v", keys, want)
	}
}

// Spans the spool could not take are counted by its cause, under the reason the pipeline
// counts them by, not as a full queue.
func TestConsumerSpoolRefusalsCountedByCause(t *testing.T) {
	full, spoolIO := counter(itemsCounters[0][consumeFull]), counter(itemsCounters[0][consumeSpoolIO])
	h := start(t, nil)
	h.rec.SetErr(pipeline.ErrSpoolIO)
	s := newStream(9).init().spans("a", "b")
	h.replay(s.buf, 0)
	h.shutdown()
	if d := counter(itemsCounters[0][consumeSpoolIO]) - spoolIO; d != 2 {
		t.Errorf("spans dropped as spool_io: %v, want 2", d)
	}
	if d := counter(itemsCounters[0][consumeFull]) - full; d != 0 {
		t.Errorf("spans dropped as full: %v, want 0", d)
	}
}

// tracesOnly is a destination that takes traces only, as a -dest with signals=traces.
type tracesOnly struct{ *testkit.Recorder }

func (tracesOnly) Signals() fastpath.SignalSet { return 1 << fastpath.Traces }

// With no destination that takes metrics (-dest signals=traces), the data points of an export
// are refused and counted as unserved, the reason the pipeline counts them by, not as an
// error; spans still pass.
func TestConsumerUnservedCountedAsUnserved(t *testing.T) {
	rec := &testkit.Recorder{}
	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{tracesOnly{rec}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := newExportServer(t, p, 1<<20)
	unserved, failed := counter(itemsCounters[1][consumeUnserved]), counter(itemsCounters[1][consumeError])
	spans := counter(itemsCounters[0][consumeAccepted])

	c := newConn(srv)
	c.feed(newStream(4).init().spans("a", "b").buf)
	c.close()
	feedProcess(srv, 5, 3, true)
	now := srv.clock.Now()
	due, _ := srv.reg.due(now, false)
	if kept := srv.exportMetrics(due, now, false); len(kept) != 0 {
		t.Fatalf("kept %d processes to export again, want none: the refusal is final", len(kept))
	}

	if d := counter(itemsCounters[1][consumeUnserved]) - unserved; d != 1 {
		t.Errorf("points dropped as unserved: %v, want 1", d)
	}
	if d := counter(itemsCounters[1][consumeError]) - failed; d != 0 {
		t.Errorf("points dropped as error: %v, want 0", d)
	}
	if d := counter(itemsCounters[0][consumeAccepted]) - spans; d != 2 {
		t.Errorf("spans accepted: %v, want 2", d)
	}
	p.Close()
	ids, bad := rec.SpanIDs()
	n := 0
	for _, c := range ids {
		n += c
	}
	if n != 2 || bad != 0 {
		t.Errorf("destination got spans %v (%d undecodable bodies), want the 2 sent", ids, bad)
	}
	for _, g := range rec.Received() {
		if g.Signal != fastpath.Traces {
			t.Errorf("destination got a %v batch of %d items, want traces only", g.Signal, g.Items)
		}
	}
}

// Two servers started on one path at once (two otlpgates, or a restart racing the old
// process): the first to lock the socket's directory binds and publishes its socket, and the
// second, which waited meanwhile, finds that socket live and fails as beside any live socket.
// The first's socket serves at the path. Without the lock the second bound the same temporary
// name, removing the first's, and one of them was left with a socket nobody reaches.
func TestTwoStartsOnOnePath(t *testing.T) {
	path := socketPath(t)
	first, second := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	testBeforePublish = func(string) {
		if calls.Add(1) == 1 {
			close(first) // the first start is between its bind and its rename
			<-second
		}
	}
	t.Cleanup(func() { testBeforePublish = nil })

	rec := &testkit.Recorder{}
	cfg := DefaultConfig()
	cfg.Listen, cfg.Engine, cfg.Loops = path, testEngine, 2
	a, err := New(cfg, rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, &testkit.Recorder{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	aErr := make(chan error, 1)
	go func() { aErr <- a.Start(context.Background()) }()
	<-first
	bErr := make(chan error, 1)
	go func() { bErr <- b.Start(context.Background()) }()
	time.Sleep(200 * time.Millisecond) // the second start gets as far as it can
	close(second)
	if err := <-aErr; err != nil {
		t.Fatalf("the first start: %v", err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	err = <-bErr
	if err == nil {
		b.Shutdown(context.Background())
		t.Fatal("the second start on the same path succeeded")
	}
	if !strings.Contains(err.Error(), "another process is listening") {
		t.Fatalf("the second start: %v, want the path's socket found live", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d sockets were published, want 1", n)
	}

	// The second start's probe of the live socket was accepted and closed by the first:
	// replay waits for the close after its own.
	testkit.WaitFor(t, "the probe's close", func() bool { return a.closed.Load() >= 1 })
	h := &harness{t: t, s: a, rec: rec, path: path}
	h.replay(newStream(1).init().spans("first").buf, 0)
	h.shutdown()
	if got := spanNames(t, rec.Received())[1]; len(got) != 1 || got[0] != "first" {
		t.Fatalf("spans through the path: %v", got)
	}
}
