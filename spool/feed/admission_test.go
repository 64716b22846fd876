package feed

import (
	"bytes"
	"errors"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/otlpgate/otlpgate/spool"
)

// entry is a v1 resource entry holding n bytes of fill.
func entry(n int, fill byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bytes.Repeat([]byte{fill}, n))
}

func admissionConfig() pipeline.Config {
	c := pipeline.DefaultConfig()
	c.BatchMaxAge = time.Hour
	return c
}

func newAdmission(t *testing.T, cfg pipeline.Config, s *spool.Spool) *Admission {
	t.Helper()
	a, err := NewAdmission(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// spooled reads every record destination d has not read yet.
func spooled(t *testing.T, s *spool.Spool) (recs [][]byte, es []spool.Entry) {
	t.Helper()
	return spooledFor(t, s, "d")
}

// spooledFor reads every record destination name has not read yet.
func spooledFor(t *testing.T, s *spool.Spool, name string) (recs [][]byte, es []spool.Entry) {
	t.Helper()
	r := s.Reader(name)
	buf := pool.GetBytes(0)
	defer pool.PutBytes(buf)
	for {
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if errors.Is(err, spool.ErrEmpty) {
			return recs, es
		}
		if err != nil {
			t.Fatal(err)
		}
		recs, es = append(recs, bytes.Clone(*buf)), append(es, e)
	}
}

// refused reads otlpgate_fastpath_refused_items_total{signal="traces",reason}.
func refused(t *testing.T, reason string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "otlpgate_fastpath_refused_items_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var sig, why string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "signal":
					sig = l.GetValue()
				case "reason":
					why = l.GetValue()
				}
			}
			if sig == "traces" && why == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("otlpgate_fastpath_refused_items_total{reason=%q} is not registered", reason)
	return 0
}

// Each request is spooled as a batch would carry it: the v1 resource entries only, an OTEP
// request re-tagged, odd top-level fields stripped; with its signal and items. Nothing is held
// in memory.
func TestAdmissionSpoolsStrippedRequests(t *testing.T) {
	s := testSpool(t, spool.NewCrashFS())
	defer s.Close()
	a := newAdmission(t, admissionConfig(), s)
	v1 := entry(10, 'a')
	otep, _ := fastpath.AppendOTEP(nil, 7, entry(5, 'b'))
	odd := append([]byte{0x28, 0x07}, entry(3, 'c')...) // field 5, then an entry
	if err := a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 2}); err != nil {
		t.Fatal(err)
	}
	if b, err := a.Admit(pipeline.Request{Signal: fastpath.Logs, Body: otep, Items: 3, Layout: fastpath.LayoutOTEP}); err != nil || b != nil {
		t.Fatalf("%v %v", b, err)
	}
	if err := a.Consume(pipeline.Request{Signal: fastpath.Metrics, Body: odd, Items: 4}); err != nil {
		t.Fatal(err)
	}
	recs, es := spooled(t, s)
	want := [][]byte{v1, entry(5, 'b'), entry(3, 'c')}
	wantSig := []fastpath.Signal{fastpath.Traces, fastpath.Logs, fastpath.Metrics}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i := range want {
		if !bytes.Equal(recs[i], want[i]) || fastpath.Signal(es[i].Signal) != wantSig[i] || int(es[i].Items) != i+2 {
			t.Errorf("record %d: %x %v %d, want %x %v %d", i, recs[i], es[i].Signal, es[i].Items, want[i], wantSig[i], i+2)
		}
	}
	if q := a.QueuedBytes(); q != 0 {
		t.Errorf("admission holds %d bytes", q)
	}
}

// A full spool and one that cannot write reach the intakes as pipeline.ErrFull
// (backpressure), each counted under its reason; a closed admission refuses; -ack=upstream
// cannot be had with a spool.
func TestAdmissionRefusals(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		c := spool.DefaultConfig()
		c.Dir, c.Sync, c.CheckpointInterval = "/spool", spool.SyncNone, time.Hour
		c.SegmentBytes, c.MaxBytes = 1<<10, 2<<10
		s, err := spool.Open(c, spool.NewCrashFS(), []string{"d"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		a := newAdmission(t, admissionConfig(), s)
		before := refused(t, "spool_full")
		var full error
		for range 10 { // 2 KiB of spool holds fewer than ten 500-byte records
			if full = a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: entry(500, 'a'), Items: 5}); full != nil {
				break
			}
		}
		if !errors.Is(full, pipeline.ErrFull) || !errors.Is(full, ErrSpoolFull) {
			t.Fatalf("a full spool: %v", full)
		}
		if d := refused(t, "spool_full") - before; d != 5 {
			t.Errorf("spool_full: counted %v items, want 5", d)
		}
		if _, es := spooled(t, s); len(es) == 0 {
			t.Fatal("nothing was spooled before the spool was full")
		}
	})
	t.Run("io", func(t *testing.T) {
		fs := spool.NewCrashFS()
		s := testSpool(t, fs)
		defer s.Close()
		a := newAdmission(t, admissionConfig(), s)
		before := refused(t, "spool_io")
		fs.SetWriteErr(errors.New("EIO"))
		err := a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: entry(10, 'a'), Items: 5})
		if !errors.Is(err, pipeline.ErrFull) || !errors.Is(err, ErrSpoolIO) {
			t.Fatalf("a spool that cannot write: %v", err)
		}
		if d := refused(t, "spool_io") - before; d != 5 {
			t.Errorf("spool_io: counted %v items, want 5", d)
		}
	})
	t.Run("closed", func(t *testing.T) {
		s := testSpool(t, spool.NewCrashFS())
		defer s.Close()
		a := newAdmission(t, admissionConfig(), s)
		a.Close()
		if err := a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: entry(1, 'a'), Items: 1}); !errors.Is(err, pipeline.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
		if _, es := spooled(t, s); len(es) != 0 {
			t.Errorf("%d records spooled after Close", len(es))
		}
		cfg := admissionConfig()
		cfg.Ack = pipeline.AckUpstream
		if _, err := NewAdmission(cfg, s); err == nil {
			t.Error("ack=upstream accepted with a spool")
		}
	})
}

// With a processor, the processed request is what is spooled: a resource the steps drop is
// not, the attribute they set is, and the items are what is left.
func TestAdmissionRunsTheProcessor(t *testing.T) {
	chain, err := process.New(process.Config{
		Set:  []process.Attr{{Key: "k8s.node.name", Value: "node-7"}},
		Drop: []process.Match{{Key: "k8s.namespace.name", Value: "dev"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := testSpool(t, spool.NewCrashFS())
	defer s.Close()
	cfg := admissionConfig()
	cfg.Processor = chain
	a := newAdmission(t, cfg, s)
	if err := a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: twoResources(t, 2, 3), Items: 5}); err != nil {
		t.Fatal(err)
	}
	if err := a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: twoResources(t, 2, 0), Items: 2}); err != nil {
		t.Fatal(err) // every entry dropped: answered as admitted, nothing spooled
	}
	recs, es := spooled(t, s)
	if len(recs) != 1 || es[0].Items != 3 {
		t.Fatalf("%d records, entries %v, want one of 3 items", len(recs), es)
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(recs[0])
	if err != nil || td.SpanCount() != 3 {
		t.Fatalf("%v spans, %v", td.SpanCount(), err)
	}
	rs := td.ResourceSpans().At(0).Resource().Attributes()
	if v, _ := rs.Get("k8s.node.name"); v.Str() != "node-7" {
		t.Errorf("k8s.node.name = %q", v.Str())
	}
	if v, _ := rs.Get("k8s.namespace.name"); v.Str() != "prod" {
		t.Errorf("k8s.namespace.name = %q, want prod", v.Str())
	}
}

// twoResources is a v1 traces request: a resource in namespace dev with devSpans spans and
// one in prod with prodSpans.
func twoResources(t testing.TB, devSpans, prodSpans int) []byte {
	td := ptrace.NewTraces()
	for _, r := range []struct {
		ns    string
		spans int
	}{{"dev", devSpans}, {"prod", prodSpans}} {
		if r.spans == 0 {
			continue
		}
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("k8s.namespace.name", r.ns)
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range r.spans {
			sp := ss.Spans().AppendEmpty()
			sp.SetName(r.ns)
			sp.SetTraceID(pcommon.TraceID{byte(i + 1)})
		}
	}
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logsOnly is a destination that takes logs only, as a -dest with signals=logs.
type logsOnly struct{ *testkit.Recorder }

func (logsOnly) Signals() fastpath.SignalSet { return 1 << fastpath.Logs }

// Serves answers, ahead of a request, what admission then does with it: a signal no
// destination takes is refused as ErrUnserved and reported as not served, before and after the
// destinations change.
func TestAdmissionServesFollowsDestinations(t *testing.T) {
	c := spool.DefaultConfig()
	c.Dir, c.Sync, c.CheckpointInterval = "/spool", spool.SyncNone, time.Hour
	s, err := spool.Open(c, spool.NewCrashFS(), []string{"d"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newAdmission(t, admissionConfig(), s)
	a.SetDestinations([]pipeline.Destination{logsOnly{&testkit.Recorder{}}})
	for sig, want := range map[fastpath.Signal]bool{fastpath.Traces: false, fastpath.Metrics: false, fastpath.Logs: true} {
		if got := a.Serves(sig); got != want {
			t.Errorf("Serves(%v) = %v, want %v", sig, got, want)
		}
		err := a.Consume(pipeline.Request{Signal: sig, Body: entry(10, 'a'), Items: 1})
		if refusedUnserved := errors.Is(err, pipeline.ErrUnserved); refusedUnserved != !want {
			t.Errorf("Consume(%v): %v, refused as unserved %v, want %v", sig, err, refusedUnserved, !want)
		}
	}
	a.SetDestinations([]pipeline.Destination{&testkit.Recorder{}})
	if !a.Serves(fastpath.Metrics) {
		t.Error("Serves(metrics) = false once a destination takes every signal")
	}
}
