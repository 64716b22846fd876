//go:build !race

package pipeline

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
)

func TestPipelineZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, sink{}, sink{}, sink{})
	v1 := entry(3000, 1)
	otep, _ := fastpath.AppendOTEP(nil, 7, v1)
	for range 100 { // warm the pools
		p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1})
		p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP})
	}
	// Every tenth request seals a batch and fans it out to three destinations.
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit + append + seal + fan-out: %v allocations per run, want 0", allocs)
	}
}

// Stripping odd top-level fields on the way into the batch allocates nothing either.
func TestPipelineStripZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 10
	p := newTestPipeline(t, cfg, sink{}, sink{})
	odd := []byte{0x12, 0x00, 0x28, 0x07, 0x3a, 0x03, 'a', 'b', 'c'} // fields 2, 5 and 7
	v1 := append(append(append([]byte{}, odd...), entry(3000, 1)...), odd...)
	otep := append(append([]byte{0x08, 0x07, 0x28, 0x01}, 0x12, 0x02, 0x01, 0x02), odd[2:]...)
	for range 100 { // warm the pools
		p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1})
		p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP})
	}
	before := testutil.ToFloat64(strippedFields.WithLabelValues("traces"))
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit with stripping: %v allocations per run, want 0", allocs)
	}
	// AllocsPerRun runs the function once more to warm up: 1001 runs of 6 + 3 stripped fields.
	if got := testutil.ToFloat64(strippedFields.WithLabelValues("traces")) - before; got != 1001*9 {
		t.Fatalf("stripped fields counted %v, want %d", got, 1001*9)
	}
}

// holdOne holds the last batch it was given until release: the destination is busy between.
type holdOne struct{ b *Batch }

func (h *holdOne) Name() string { return "hold-one" }
func (h *holdOne) Enqueue(b *Batch) error {
	h.b = b
	return nil
}
func (h *holdOne) release() {
	b := h.b
	h.b = nil
	b.Done(true)
}

// Eager batching allocates nothing either: a request sealed at admission, one waiting behind
// it, and the kick that seals the waiting one when the first finishes.
func TestPipelineEagerZeroAlloc(t *testing.T) {
	for _, gap := range []time.Duration{0, time.Hour} {
		cfg := testConfig()
		cfg.Eager = true
		cfg.BatchMinGap = gap // an hour: the kick arms the gap timer instead of sealing
		h := &holdOne{}
		p := newTestPipeline(t, cfg, h, sink{})
		v1 := entry(3000, 1)
		step := func() {
			if err := p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1}); err != nil { // sealed (idle) or waits (gap)
				t.Fatal(err)
			}
			if err := p.Consume(Request{Signal: fastpath.Traces, Body: v1, Items: 1}); err != nil { // waits behind the first
				t.Fatal(err)
			}
			if h.b != nil {
				h.release() // kicks: seals the waiting batch, or arms the gap timer
			}
			if h.b != nil {
				h.release()
			}
			if gap > 0 {
				p.Flush()
				if h.b != nil {
					h.release()
				}
			}
		}
		for range 100 { // warm the pools
			step()
		}
		if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
			t.Fatalf("gap %v: eager admit + kick: %v allocations per run, want 0", gap, allocs)
		}
		if q := p.QueuedBytes(); q != 0 {
			t.Fatalf("gap %v: queued %d bytes, want 0", gap, q)
		}
	}
}

// Admission with processing steps (an attribute set, a drop rule, the client's address from
// the request's origin) allocates nothing.
func TestPipelineProcessorZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 50
	cfg.Processor = NewTestChain(t, ChainSpec{
		Set:      [][2]string{{"k8s.node.name", "node-7"}},
		Drop:     [][2]string{{"k8s.namespace.name", "dev"}},
		FromPeer: "client.address",
	})
	from := Origin{Peer: netip.MustParseAddr("2001:db8::7")}
	b := &testBudget{max: 64 << 20}
	cfg.Budget, cfg.ConsumeBudget = b, b // charged as it grows, given back: without allocating
	p := newTestPipeline(t, cfg, sink{}, sink{})
	req := twoResources(t, 2, 3)
	otep, _ := fastpath.AppendOTEP(nil, 7, req)
	// 128 empty resource entries, which the set makes 16 times larger: charged as it grows.
	empty := bytes.Repeat([]byte{0x0a, 0x00}, 128)
	for range 100 { // warm the pools
		p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: 5})
		p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 5, Layout: fastpath.LayoutOTEP})
		p.Admit(Request{Signal: fastpath.Traces, Origin: from, Body: req, Items: 5})
		p.Consume(Request{Signal: fastpath.Traces, Body: empty, Items: 0})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: from, Body: req, Items: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: otep, Items: 5, Layout: fastpath.LayoutOTEP}); err != nil {
			t.Fatal(err)
		}
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: empty, Items: 0}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit with processing: %v allocations per run, want 0", allocs)
	}
	if b.held != 0 || b.high == 0 {
		t.Fatalf("budget holds %d, high water %d: want 0 after every request, charged while processed", b.held, b.high)
	}
}

// Admission with consistent sampling, which writes a threshold into the trace_state of every
// span it keeps (at 100%, all of them: the entry grows by a third), allocates nothing.
func TestPipelineConsistentSamplingZeroAlloc(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 64 << 10
	cfg.BatchMaxItems = 50
	cfg.Processor = NewTestChain(t, ChainSpec{Sample: true})
	cfg.BatchMaxItems = 1000
	p := newTestPipeline(t, cfg, sink{}, sink{})
	// One entry just below a pooled buffer's size (4 KiB), which the trace_states push past it.
	// (A slack too small would still not show here once warm: the buffer append reallocates
	// goes back to the pool, and the next request gets it. process/'s fuzz target checks the
	// slack's bound.)
	var req []byte
	n := 0
	for len(req) < 3900 {
		n++
		req = twoResources(t, 0, n)
	}
	if len(req) >= 4000 {
		t.Fatalf("%d bytes", len(req))
	}
	for range 100 { // warm the pools
		p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: n})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: req, Items: n}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admit with consistent sampling: %v allocations per run, want 0", allocs)
	}
}
