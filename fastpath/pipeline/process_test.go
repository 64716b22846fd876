package pipeline

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

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

// Every request runs the processor before it joins a batch, in either layout: the batch holds
// the processed entries, its item count is what is left, and stripped fields are still
// counted.
func TestProcessorRunsBeforeBatching(t *testing.T) {
	cfg := testConfig()
	cfg.Processor = testChain(t)
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	v1 := twoResources(t, 2, 3)
	odd := []byte{0x28, 0x07} // a top-level field 5: stripped
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: append(append([]byte{}, odd...), v1...), Items: 5}); err != nil {
		t.Fatal(err)
	}
	otep, err := fastpath.AppendOTEP(nil, 9, v1)
	if err != nil {
		t.Fatal(err)
	}
	stripped := testutil.ToFloat64(strippedFields.WithLabelValues("traces"))
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 5, Layout: fastpath.LayoutOTEP}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(strippedFields.WithLabelValues("traces")) - stripped; got != 0 {
		t.Errorf("the OTEP id was counted as stripped: %v", got)
	}
	p.Flush()
	got := r.batches()
	if len(got) != 1 || got[0].items != 6 {
		t.Fatalf("batches %+v, want one of 6 items", got)
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(got[0].body)
	if err != nil {
		t.Fatal(err)
	}
	rss := td.ResourceSpans()
	if rss.Len() != 2 || td.SpanCount() != 6 {
		t.Fatalf("%d resources, %d spans, want 2 and 6", rss.Len(), td.SpanCount())
	}
	for i := range rss.Len() {
		a := rss.At(i).Resource().Attributes().AsRaw()
		if want := map[string]any{"k8s.namespace.name": "prod", "k8s.node.name": "node-7"}; !maps.Equal(a, want) {
			t.Errorf("resource %d: %v, want %v", i, a, want)
		}
	}
}

// A request whose every resource is dropped is answered as admitted and admits nothing.
func TestProcessorEmptyRequestIsNotAdmitted(t *testing.T) {
	for _, ack := range []AckMode{AckAccept, AckUpstream} {
		cfg := testConfig()
		cfg.Ack = ack
		cfg.Processor = testChain(t)
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		admitted := testutil.ToFloat64(admittedItems.WithLabelValues("traces"))
		b, err := p.Admit(Request{Signal: fastpath.Traces, Body: twoResources(t, 4, 0), Items: 4})
		if err != nil || b != nil {
			t.Fatalf("%v: Admit = %v, %v, want nil, nil", ack, b, err)
		}
		if q := p.QueuedBytes(); q != 0 {
			t.Errorf("%v: %d bytes queued", ack, q)
		}
		p.Flush()
		if n := len(r.batches()); n != 0 {
			t.Errorf("%v: %d batches sealed", ack, n)
		}
		if d := testutil.ToFloat64(admittedItems.WithLabelValues("traces")) - admitted; d != 0 {
			t.Errorf("%v: %v items counted as admitted", ack, d)
		}
	}
}

// A request the processor cannot read is refused whole; nothing of it is admitted.
func TestProcessorRefusesMalformedEntries(t *testing.T) {
	cfg := testConfig()
	cfg.Processor = testChain(t)
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	bad := append(twoResources(t, 0, 1), 0x0a, 0x03, 0x0a, 0x05, 0x00) // a Resource past its entry
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: bad, Items: 2}); err == nil {
		t.Fatal("no error")
	}
	p.Flush()
	if n := len(r.batches()); n != 0 || p.QueuedBytes() != 0 {
		t.Errorf("%d batches, %d bytes queued", n, p.QueuedBytes())
	}
}

// What the steps removed counts once a request is in: a request refused for want of room and
// sent again is counted once, as is one answered without admitting anything.
func TestProcessorCountsOnlyAdmittedRequests(t *testing.T) {
	dropped := func() float64 {
		mfs, err := prometheus.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "otlpgate_process_dropped_items_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "signal" && l.GetValue() == "traces" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		t.Fatal("otlpgate_process_dropped_items_total{signal=\"traces\"} is not registered")
		return 0
	}
	cfg := testConfig()
	cfg.Processor = testChain(t)
	req := twoResources(t, 2, 3)
	cfg.QueueMaxBytes = int64(len(req)) + 64 // room for one request
	cfg.BatchMaxBytes = int(cfg.QueueMaxBytes)
	r := &recorder{name: "r", ok: true, hold: true}
	p := newTestPipeline(t, cfg, r)
	before := dropped()
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: 5}); err != nil {
		t.Fatal(err)
	}
	p.Flush() // the batch is held by the destination: the queue is full
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: 5}); err != ErrFull {
		t.Fatalf("second request: %v, want ErrFull", err)
	}
	if d := dropped() - before; d != 2 {
		t.Fatalf("after one admitted and one refused request: %v dropped items counted, want 2", d)
	}
	r.release(true)
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: 5}); err != nil {
		t.Fatal(err)
	}
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: twoResources(t, 2, 0), Items: 2}); err != nil {
		t.Fatal(err)
	}
	if d := dropped() - before; d != 6 {
		t.Fatalf("%v dropped items counted, want 6", d)
	}
}

// testBudget is a Budget of max bytes that records its high water.
type testBudget struct {
	mu              sync.Mutex
	max, held, high int64
	refused         int
}

func (b *testBudget) TryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.max {
		b.refused++
		return false
	}
	b.held += n
	b.high = max(b.high, b.held)
	return true
}

func (b *testBudget) Give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held -= n; b.held < 0 {
		panic("BUG: budget given back more than it gave")
	}
}

// What the steps write is charged to the budget of the intake as it grows, and a request
// whose output would pass a bound is refused before it is built, counted: a request of empty
// resource entries, which an attribute set makes a hundred times larger, is refused with
// ErrBudget when the budget cannot hold its output, and with ErrTooLarge (too_large) when the
// queue could not; the budget holds nothing afterwards, and one that fits is admitted.
func TestProcessorOutputCharged(t *testing.T) {
	chain := NewTestChain(t, ChainSpec{Set: [][2]string{{"amplified", strings.Repeat("v", 200)}}})
	empty := bytes.Repeat([]byte{0x0a, 0x00}, 64<<10) // 128 KiB that become 14 MiB
	refused := func(why string) float64 {
		return testutil.ToFloat64(refusedItems.WithLabelValues("traces", why))
	}
	t.Run("budget", func(t *testing.T) {
		cfg := testConfig()
		cfg.Processor = chain
		b := &testBudget{max: 4 << 20}
		cfg.ConsumeBudget = b
		p := newTestPipeline(t, cfg, &recorder{name: "r", ok: true})
		before := refused("intake_bytes")
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: append(slices.Clip(empty), twoResources(t, 0, 3)...), Items: 3}); !errors.Is(err, ErrBudget) || !errors.Is(err, ErrFull) {
			t.Fatalf("Consume = %v, want ErrBudget (ErrFull)", err)
		}
		if d := refused("intake_bytes") - before; d != 3 {
			t.Errorf("intake_bytes: %v items counted, want 3", d)
		}
		if b.held != 0 || b.high > b.max || b.refused != 1 {
			t.Errorf("budget holds %d, high water %d of %d, %d refusals; want 0 held, 1 refusal", b.held, b.high, b.max, b.refused)
		}
		if p.QueuedBytes() != 0 {
			t.Errorf("%d bytes queued", p.QueuedBytes())
		}
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: twoResources(t, 0, 3), Items: 3}); err != nil {
			t.Fatalf("a request that fits: %v", err)
		}
		if b.held != 0 {
			t.Errorf("budget holds %d after an admitted request", b.held)
		}
	})
	// A copy of the request's own size is bounded with the body its intake holds and not
	// charged again: a request the steps do not grow is admitted with the budget full (gRPC
	// calls' reservations fill it).
	t.Run("full budget, no growth", func(t *testing.T) {
		cfg := testConfig()
		cfg.Processor = testChain(t)
		b := &testBudget{max: 0}
		cfg.Budget, cfg.ConsumeBudget = b, b
		p := newTestPipeline(t, cfg, &recorder{name: "r", ok: true})
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: twoResources(t, 2, 3), Items: 5}); err != nil {
			t.Fatalf("Admit with the budget full: %v", err)
		}
		if b.refused != 0 || b.high != 0 {
			t.Errorf("budget asked %d times, high water %d: want nothing charged", b.refused, b.high)
		}
	})
	t.Run("queue", func(t *testing.T) {
		cfg := testConfig()
		cfg.Processor = chain
		cfg.QueueMaxBytes = 2 << 20
		b := &testBudget{max: 1 << 30}
		cfg.Budget = b
		p := newTestPipeline(t, cfg, &recorder{name: "r", ok: true})
		before := refused("too_large")
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: empty, Items: 0}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Admit = %v, want ErrTooLarge", err)
		}
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: append(slices.Clip(empty), twoResources(t, 0, 2)...), Items: 2}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Admit = %v, want ErrTooLarge", err)
		}
		if d := refused("too_large") - before; d != 2 {
			t.Errorf("too_large: %v items counted, want 2", d)
		}
		if b.held != 0 || b.high > 4<<20 {
			t.Errorf("budget holds %d, high water %d: want 0, and no more than twice the queue", b.held, b.high)
		}
	})
}

// Steps replace the processing while requests flow: a request runs through the steps in force
// when it is admitted, and none after Set(nil), when a compressed request may pass through
// again as it does without steps.
func TestStepsReplaced(t *testing.T) {
	cfg := testConfig()
	cfg.Steps = NewSteps(testChain(t))
	cfg.Processor = testChain(t) // ignored: Steps take its place
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	node := func() []string {
		t.Helper()
		p.Flush()
		var out []string
		for _, b := range r.batches() {
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b.body)
			if err != nil {
				t.Fatal(err)
			}
			for i := range td.ResourceSpans().Len() {
				v, ok := td.ResourceSpans().At(i).Resource().Attributes().Get("k8s.node.name")
				if !ok {
					out = append(out, "")
					continue
				}
				out = append(out, v.AsString())
			}
		}
		return out
	}
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: twoResources(t, 1, 1), Items: 2}); err != nil {
		t.Fatal(err)
	}
	other := NewTestChain(t, ChainSpec{Set: [][2]string{{"k8s.node.name", "node-8"}}})
	cfg.Steps.Set(other)
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: twoResources(t, 1, 1), Items: 2}); err != nil {
		t.Fatal(err)
	}
	cfg.Steps.Set(nil)
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: twoResources(t, 1, 1), Items: 2}); err != nil {
		t.Fatal(err)
	}
	// The first request lost its dev resource to the first chain's drop; the second kept it.
	if got, want := node(), []string{"node-7", "node-8", "node-8", "", ""}; !slices.Equal(got, want) {
		t.Errorf("k8s.node.name of the resources: %q, want %q", got, want)
	}
	pt := cfg
	pt.PassThrough = true
	if f, ok := passesTo(&pt, EncodingGzip, fastpath.Traces, twoResources(t, 0, 1), EncodingGzip); !ok {
		t.Errorf("no steps in force: a compressed request falls back (%v)", f)
	}
	cfg.Steps.Set(other)
	if f, ok := passesTo(&pt, EncodingGzip, fastpath.Traces, twoResources(t, 0, 1), EncodingGzip); ok || f != FallbackProcessor {
		t.Errorf("steps in force: %v %v, want FallbackProcessor", f, ok)
	}
}
