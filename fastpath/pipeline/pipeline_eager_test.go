package pipeline

import (
	"bytes"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
)

// holdSig is a destination that keeps a copy of every batch, holds the batches of the signals
// in hold until the test releases them, and finishes the others at once, inside Enqueue.
type holdSig struct {
	hold [fastpath.NumSignals]bool
	recorder
}

func (h *holdSig) Enqueue(b *Batch) error {
	h.recorder.hold = h.hold[b.Signal]
	return h.recorder.Enqueue(b)
}

// concat is the bodies of reqs back to back: what a batch of them holds.
func concat(reqs ...[]byte) []byte { return bytes.Join(reqs, nil) }

// An idle path seals the first request at admission, with the default configuration; requests
// that arrive while that batch is out wait, and leave together the moment the destination
// finishes it, without another request to carry them.
func TestEagerSealsWhenDestinationFrees(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchMinGap = 0 // the gap has tests of its own below
	cfg.BatchMaxAge = time.Hour
	r := &recorder{name: "r", hold: true}
	p := newTestPipeline(t, cfg, r)
	a, b, c := entry(10, 1), entry(20, 2), entry(30, 3)
	p.Consume(Request{Signal: fastpath.Traces, Body: a, Items: 1})
	if got := r.batches(); len(got) != 1 || !bytes.Equal(got[0].body, a) {
		t.Fatalf("idle path: batches %+v, want the first request sealed at once", got)
	}
	p.Consume(Request{Signal: fastpath.Traces, Body: b, Items: 2})
	p.Consume(Request{Signal: fastpath.Traces, Body: c, Items: 3})
	if n := len(r.batches()); n != 1 {
		t.Fatalf("busy path: %d batches, want the two requests waiting behind the first", n)
	}
	if n := r.release(true); n != 1 {
		t.Fatalf("released %d batches, want 1", n)
	}
	got := r.batches()
	if len(got) != 2 || got[1].items != 5 || !bytes.Equal(got[1].body, concat(b, c)) {
		t.Fatalf("after the destination finished: batches %+v, want the two waiting requests sealed together", got)
	}
	r.release(true)
	if n := len(r.batches()); n != 2 {
		t.Fatalf("%d batches after the second finished, want nothing more: nothing was open", n)
	}
	d := entry(40, 4)
	p.Consume(Request{Signal: fastpath.Traces, Body: d, Items: 4})
	if got := r.batches(); len(got) != 3 || got[2].items != 4 || !bytes.Equal(got[2].body, d) {
		t.Fatalf("idle again: batches %+v, want the next request sealed at once", got)
	}
	r.release(true)
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d bytes after every batch finished, want 0", q)
	}
}

// The kick seals the waiting batches of every signal; a destination that finishes some of them
// inside Enqueue kicks again from within the pass, which must neither recurse nor lose a batch.
func TestEagerKickSealsEverySignal(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchMinGap = 0
	cfg.BatchMaxAge = time.Hour
	h := &holdSig{}
	h.name = "h"
	h.hold[fastpath.Traces] = true // logs and metrics finish inside Enqueue
	p := newTestPipeline(t, cfg, h)
	t1, t2 := entry(10, 1), entry(11, 2)
	l1, l2, m1 := entry(12, 3), entry(13, 4), entry(14, 5)
	p.Consume(Request{Signal: fastpath.Traces, Body: t1, Items: 1})
	p.Consume(Request{Signal: fastpath.Logs, Body: l1, Items: 1})
	p.Consume(Request{Signal: fastpath.Logs, Body: l2, Items: 1})
	p.Consume(Request{Signal: fastpath.Metrics, Body: m1, Items: 1})
	p.Consume(Request{Signal: fastpath.Traces, Body: t2, Items: 1})
	if got := h.batches(); len(got) != 1 {
		t.Fatalf("batches %+v, want only the first traces request out", got)
	}
	h.release(true)
	got := h.batches()
	want := []recorded{{fastpath.Traces, 1, t1, "", EncodingNone}, {fastpath.Traces, 1, t2, "", EncodingNone}, {fastpath.Metrics, 1, m1, "", EncodingNone}, {fastpath.Logs, 2, concat(l1, l2), "", EncodingNone}}
	if len(got) != len(want) {
		t.Fatalf("batches %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].sig != w.sig || got[i].items != w.items || !bytes.Equal(got[i].body, w.body) {
			t.Errorf("batch %d: %v, %d items, %x; want %v, %d items, %x", i, got[i].sig, got[i].items, got[i].body, w.sig, w.items, w.body)
		}
	}
	h.release(true)
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d bytes, want 0", q)
	}
}

// A batch waiting behind one in flight leaves when the destination finishes, but not within
// BatchMinGap of the signal's last seal: then its gap timer seals it, never before the gap and
// at most 1.25 gaps after the last seal.
func TestEagerKickHonoursMinGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.BatchMinGap = 300 * time.Millisecond
		cfg.BatchMaxAge = time.Minute
		r := &recorder{name: "r", hold: true}
		p := newTestPipeline(t, cfg, r)
		a, b := entry(10, 1), entry(20, 2)
		p.Consume(Request{Signal: fastpath.Traces, Body: a, Items: 1})
		p.Consume(Request{Signal: fastpath.Traces, Body: b, Items: 1})
		r.release(true)
		synctest.Wait()
		if n := len(r.batches()); n != 1 {
			t.Fatalf("%d batches right after the first finished, within the gap: want the second held back", n)
		}
		time.Sleep(cfg.BatchMinGap - time.Nanosecond)
		synctest.Wait()
		if n := len(r.batches()); n != 1 {
			t.Fatalf("%d batches just before the gap passed, want the second still held back", n)
		}
		time.Sleep(cfg.BatchMinGap/4 + time.Nanosecond)
		synctest.Wait()
		got := r.batches()
		if len(got) != 2 || got[1].items != 1 || !bytes.Equal(got[1].body, b) {
			t.Fatalf("batches %+v 1.25 gaps after the first seal, want the held request sealed", got)
		}
		r.release(true)
	})
}

// A gap timer that fires while the destinations hold another batch leaves the open batch to
// fill; it is sealed when they finish.
func TestEagerGapWaitsForBusyDestination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.BatchMinGap = 100 * time.Millisecond
		cfg.BatchMaxAge = time.Minute
		h := &holdSig{}
		h.name = "h"
		h.hold[fastpath.Logs] = true // traces finish at once
		p := newTestPipeline(t, cfg, h)
		t1, t2, l1 := entry(10, 1), entry(20, 2), entry(30, 3)
		p.Consume(Request{Signal: fastpath.Traces, Body: t1, Items: 1}) // sealed at once, finished at once
		p.Consume(Request{Signal: fastpath.Traces, Body: t2, Items: 1}) // within the gap: waits for the gap timer
		p.Consume(Request{Signal: fastpath.Logs, Body: l1, Items: 1})   // no logs sealed yet: sealed at once, held
		if got := h.batches(); len(got) != 2 || got[0].sig != fastpath.Traces || got[1].sig != fastpath.Logs {
			t.Fatalf("batches %+v, want the first traces request and the logs request", got)
		}
		time.Sleep(3 * cfg.BatchMinGap) // the traces gap timer fires meanwhile
		synctest.Wait()
		if n := len(h.batches()); n != 2 {
			t.Fatalf("%d batches: the gap timer sealed traces while the logs batch was out", n)
		}
		h.release(true)
		got := h.batches()
		if len(got) != 3 || got[2].sig != fastpath.Traces || !bytes.Equal(got[2].body, t2) {
			t.Fatalf("batches %+v, want the waiting traces request sealed when the logs batch finished", got)
		}
	})
}

// Close seals what waits; a batch finished afterwards kicks nothing.
func TestEagerCloseWhileBusy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchMaxAge = time.Hour
	r := &recorder{name: "r", hold: true}
	p, err := New(cfg, []Destination{r})
	if err != nil {
		t.Fatal(err)
	}
	a, b := entry(10, 1), entry(20, 2)
	p.Consume(Request{Signal: fastpath.Traces, Body: a, Items: 1})
	p.Consume(Request{Signal: fastpath.Traces, Body: b, Items: 1})
	p.Close()
	got := r.batches()
	if len(got) != 2 || !bytes.Equal(got[1].body, b) {
		t.Fatalf("batches %+v, want the waiting request sealed by Close", got)
	}
	if n := r.release(true); n != 2 {
		t.Fatalf("released %d, want 2", n)
	}
	if n := len(r.batches()); n != 2 || p.QueuedBytes() != 0 {
		t.Fatalf("%d batches, %d bytes queued after Close and release, want 2 and 0", n, p.QueuedBytes())
	}
}

// asyncDest finishes every batch on a goroutine of its own, as a network destination does.
type asyncDest struct {
	ch    chan *Batch
	wg    sync.WaitGroup
	mu    sync.Mutex
	items int
	body  [fastpath.NumSignals][]byte
}

func newAsyncDest() *asyncDest {
	d := &asyncDest{ch: make(chan *Batch, 1024)}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for b := range d.ch {
			d.mu.Lock()
			d.items += b.Items
			d.body[b.Signal] = append(d.body[b.Signal], b.Payload.Bytes()...)
			d.mu.Unlock()
			b.Done(true)
		}
	}()
	return d
}

func (d *asyncDest) Name() string { return "async" }
func (d *asyncDest) Enqueue(b *Batch) error {
	d.ch <- b
	return nil
}

// Under concurrent admission against a destination that finishes on its own goroutine, every
// request arrives once, in its writer's order within each signal, and the budget settles.
func TestEagerConcurrent(t *testing.T) {
	for _, gap := range []time.Duration{0, 100 * time.Microsecond} {
		cfg := DefaultConfig()
		cfg.BatchMinGap = gap
		cfg.BatchMaxAge = time.Hour
		d := newAsyncDest()
		p, err := New(cfg, []Destination{d})
		if err != nil {
			t.Fatal(err)
		}
		const writers, each = 3, 500
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := p.Consume(Request{Signal: fastpath.Signal(w), Body: entry(8, byte(i)), Items: 1}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		p.Close()
		close(d.ch)
		d.wg.Wait()
		if d.items != writers*each {
			t.Fatalf("gap %v: delivered %d items, want %d", gap, d.items, writers*each)
		}
		for w := range writers {
			var want []byte
			for i := range each {
				want = append(want, entry(8, byte(i))...)
			}
			if !bytes.Equal(d.body[w], want) {
				t.Fatalf("gap %v: signal %d delivered out of order or incomplete", gap, w)
			}
		}
		if q := p.QueuedBytes(); q != 0 {
			t.Fatalf("gap %v: queued %d bytes, want 0", gap, q)
		}
	}
}

// Within the gap a request waits; the first request after the gap seals the batch at admission
// and disarms the gap timer, so that the timer, set as a fallback a quarter of a gap past the gap's end,
// never seals the next batch early; a request followed by silence leaves with the fallback.
func TestGapSealsWithNextRequestOrFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.BatchMinGap = 150 * time.Millisecond
		cfg.BatchMaxAge = time.Minute
		r := &recorder{name: "r"} // finishes every batch inside Enqueue
		p := newTestPipeline(t, cfg, r)
		a, b, c, d := entry(10, 1), entry(20, 2), entry(30, 3), entry(40, 4)
		start := time.Now()
		p.Consume(Request{Signal: fastpath.Traces, Body: a, Items: 1}) // idle: sealed at once
		p.Consume(Request{Signal: fastpath.Traces, Body: b, Items: 1}) // within the gap: held, the fallback armed for 1.25 gaps after a
		time.Sleep(cfg.BatchMinGap + cfg.BatchMinGap/8)
		p.Consume(Request{Signal: fastpath.Traces, Body: c, Items: 1}) // past the gap: seals b and c at admission, disarms the fallback
		second := time.Now()
		p.Consume(Request{Signal: fastpath.Traces, Body: d, Items: 1}) // within the new gap: held until its own fallback
		got := r.batches()
		if len(got) != 2 || !bytes.Equal(got[0].body, a) || !bytes.Equal(got[1].body, concat(b, c)) || got[1].items != 2 {
			t.Fatalf("batches %+v, want [a] [b c], and d held", got)
		}
		// The first fallback, had it stayed armed, would seal d at 1.25 gaps after a.
		time.Sleep(time.Until(start.Add(cfg.BatchMinGap + cfg.BatchMinGap/4 + time.Millisecond)))
		synctest.Wait()
		if n := len(r.batches()); n != 2 {
			t.Fatalf("%d batches 1.25 gaps after a: a stale timer sealed d", n)
		}
		// d's own fallback is due 1.25 gaps after [b c], not before.
		time.Sleep(time.Until(second.Add(cfg.BatchMinGap + cfg.BatchMinGap/4 - time.Nanosecond)))
		synctest.Wait()
		if n := len(r.batches()); n != 2 {
			t.Fatalf("%d batches before d's fallback was due, want d still held", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := r.batches(); len(got) != 3 || !bytes.Equal(got[2].body, d) {
			t.Fatalf("batches %+v 1.25 gaps after [b c], want d sealed by its fallback", got)
		}
	})
}

// With the defaults the gap (200ms) equals BatchMaxAge: a request held by the gap leaves at its
// batch's age at the latest, 200ms after the batch's first request, before the gap's fallback
// timer (1.25 gaps after the last seal) and whether or not another request comes.
func TestDefaultGapBoundedByAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		if cfg.BatchMinGap != 200*time.Millisecond || cfg.BatchMaxAge != 200*time.Millisecond {
			t.Fatalf("defaults gap %v age %v, want both 200ms", cfg.BatchMinGap, cfg.BatchMaxAge)
		}
		r := &recorder{name: "r"}
		p := newTestPipeline(t, cfg, r)
		a, b := entry(10, 1), entry(20, 2)
		p.Consume(Request{Signal: fastpath.Traces, Body: a, Items: 1}) // idle: sealed at once
		time.Sleep(40 * time.Millisecond)
		opened := time.Now()
		p.Consume(Request{Signal: fastpath.Traces, Body: b, Items: 1}) // within the gap: held
		time.Sleep(time.Until(opened.Add(cfg.BatchMaxAge - time.Nanosecond)))
		synctest.Wait()
		if n := len(r.batches()); n != 1 {
			t.Fatalf("%d batches before b's batch reached its age, want b held", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		got := r.batches()
		if len(got) != 2 || !bytes.Equal(got[1].body, b) {
			t.Fatalf("batches %+v at b's batch's age, want b sealed by its age", got)
		}
		if d := time.Since(opened); d != cfg.BatchMaxAge {
			t.Fatalf("b left %v after it came, want %v", d, cfg.BatchMaxAge)
		}
	})
}
