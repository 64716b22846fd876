package feed

import (
	"encoding/binary"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dest is a destination that keeps what it is given until the test answers: the test takes the
// batches themselves and finishes each as it chooses, and a full dest refuses and keeps the
// refused batch, which testkit.Recorder does not do.
type dest struct {
	mu      sync.Mutex
	batches []*pipeline.Batch
	got     chan struct{}
	full    bool
	refused []*pipeline.Batch // every offer refused while full, in order
}

func newDest() *dest { return &dest{got: make(chan struct{}, 1000)} }

func (d *dest) Name() string { return "d" }

func (d *dest) Enqueue(b *pipeline.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full {
		d.refused = append(d.refused, b)
		return pipeline.ErrFull
	}
	d.batches = append(d.batches, b)
	d.got <- struct{}{}
	return nil
}

// take waits (boundedly) for n batches and returns them.
func (d *dest) take(t *testing.T, n int) []*pipeline.Batch {
	t.Helper()
	for range n {
		select {
		case <-d.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("fewer than %d batches", n)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.batches[:n:n]
	d.batches = append([]*pipeline.Batch(nil), d.batches[n:]...)
	return out
}

// rec is record i: its number in 8 bytes, padded to size.
func rec(i, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint64(p, uint64(i))
	return p
}

// ids returns the record numbers of a batch of records of size bytes each.
func ids(b *pipeline.Batch, size int) []int {
	var out []int
	p := b.Payload.Bytes()
	for len(p) >= size {
		out = append(out, int(binary.BigEndian.Uint64(p)))
		p = p[size:]
	}
	return out
}

func testSpool(t *testing.T, fs spool.FS) *spool.Spool {
	t.Helper()
	return openSpool(t, fs, nil, "d")
}

// openSpool opens a spool on fs for dests: small segments, no sync, no checkpoint, and what
// mod changes.
func openSpool(t *testing.T, fs spool.FS, mod func(*spool.Config), dests ...string) *spool.Spool {
	t.Helper()
	c := spool.DefaultConfig()
	c.Dir = "/spool"
	c.Sync = spool.SyncNone
	c.SegmentBytes = 4 << 10
	c.MaxBytes = 1 << 20
	c.CheckpointInterval = time.Hour
	if mod != nil {
		mod(&c)
	}
	s, err := spool.Open(c, fs, dests)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startFeeder starts a feeder of d, with feedConfig, from the reader of destination name in s.
// The caller stops it, before the spool closes.
func startFeeder(t *testing.T, s *spool.Spool, name string, d pipeline.Destination) *Feeder {
	t.Helper()
	f, err := New(feedConfig(), s.Reader(name), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	return f
}

func feedConfig() Config {
	return Config{MaxBytes: 1 << 20, BatchMaxBytes: 1000, BatchMaxItems: 1000, BatchMaxAge: 10 * time.Millisecond}
}

// Records are batched in order, a batch holding consecutive records of one signal within the
// byte limit; delivered batches finish their records, rejected ones drop them (counted), and
// both move the destination's position.
func TestFeederBatchesFinishesAndDrops(t *testing.T) {
	fs := spool.NewCrashFS()
	s := testSpool(t, fs)
	defer s.Close()
	// Records 0-5 traces, 6 metrics, 7-8 traces; 300 bytes each: three fit in a batch.
	sigs := []fastpath.Signal{0, 0, 0, 0, 0, 0, 1, 0, 0}
	for i, sig := range sigs {
		if _, err := s.Append(spool.Record{Signal: uint8(sig), Items: uint32(i + 1), Payload: rec(i, 300)}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDest()
	f := startFeeder(t, s, "d", d)
	defer f.Stop()
	// No batch is in the destination's hands at first, so each leaves as soon as it is full
	// or the spool has no more; all records are already there.
	bs := d.take(t, 4)
	want := [][]int{{0, 1, 2}, {3, 4, 5}, {6}, {7, 8}}
	wantItems := []int{1 + 2 + 3, 4 + 5 + 6, 7, 8 + 9}
	for i, b := range bs {
		got := ids(b, 300)
		if len(got) != len(want[i]) || b.Items != wantItems[i] || b.Signal != sigs[want[i][0]] {
			t.Fatalf("batch %d: records %v items %d signal %v, want %v items %d", i, got, b.Items, b.Signal, want[i], wantItems[i])
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("batch %d: records %v, want %v", i, got, want[i])
			}
		}
	}
	if h := f.HeldBytes(); h <= 0 {
		t.Fatalf("held %d bytes with four batches out", h)
	}
	start := s.Reader("d").Position()
	bs[1].Done(true) // out of order: the position waits for batch 0
	if s.Reader("d").Position() != start {
		t.Fatal("position moved past an unfinished record")
	}
	bs[0].Done(false) // rejected: dropped and counted
	bs[2].Done(true)
	bs[3].Done(true)
	if n := s.Reader("d").Unfinished(); n != 0 {
		t.Fatalf("%d records unfinished after every batch was done", n)
	}
	if h := f.HeldBytes(); h != 0 {
		t.Fatalf("held %d bytes after every batch was done", h)
	}
	if n := dropped(t, "undeliverable"); n != 3 {
		t.Fatalf("%v records counted dropped as undeliverable, want the 3 of the rejected batch", n)
	}
}

// dropped reads otlpgate_spool_dropped_records_total for destination d.
func dropped(t *testing.T, reason string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "otlpgate_spool_dropped_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["destination"] == "d" && l["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Stop leaves what the destination gives up unfinished: a new spool on the same files reads
// it again, and nothing that was delivered.
func TestFeederStopLeavesUndeliveredForNextStart(t *testing.T) {
	fs := spool.NewCrashFS()
	s := testSpool(t, fs)
	for i := range 6 {
		if _, err := s.Append(spool.Record{Items: 1, Payload: rec(i, 400)}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDest()
	f, _ := New(feedConfig(), s.Reader("d"), d, nil)
	f.Start()
	bs := d.take(t, 3) // {0,1} {2,3} {4,5}
	bs[0].Done(true)
	f.Stop()
	bs[1].Done(false) // a destination dropping at shutdown
	bs[2].Done(false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = testSpool(t, fs)
	defer s.Close()
	d = newDest()
	f, _ = New(feedConfig(), s.Reader("d"), d, nil)
	f.Start()
	defer f.Stop()
	bs = d.take(t, 2)
	got := append(ids(bs[0], 400), ids(bs[1], 400)...)
	if len(got) != 4 || got[0] != 2 || got[3] != 5 {
		t.Fatalf("replayed records %v, want 2..5", got)
	}
	for _, b := range bs {
		b.Done(true)
	}
}

// The feeder hands over no more than MaxBytes (plus one batch) whatever the spool holds; the
// rest stays on disk until batches finish.
func TestFeederBoundsWhatItHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := spool.NewCrashFS()
		s := testSpool(t, fs)
		defer s.Close()
		const n = 200
		for i := range n {
			if _, err := s.Append(spool.Record{Items: 1, Payload: rec(i, 500)}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := feedConfig()
		cfg.MaxBytes = 8 << 10
		d := newDest()
		f, _ := New(cfg, s.Reader("d"), d, nil)
		f.Start()
		defer f.Stop()
		next := 0
		for next < n {
			bs := d.take(t, 1)
			// Let the feeder run until it blocks, so that it overshoots if it would; then check
			// the bound.
			synctest.Wait()
			if h := f.HeldBytes(); h > cfg.MaxBytes+int64(4<<10) {
				t.Fatalf("held %d bytes, bound %d plus one batch", h, cfg.MaxBytes)
			}
			for _, id := range ids(bs[0], 500) {
				if id != next {
					t.Fatalf("record %d arrived, want %d (oldest first)", id, next)
				}
				next++
			}
			bs[0].Done(true)
		}
	})
}

// A destination whose queue is full is offered the same batch again, unchanged, until it takes
// it: the record stays unfinished meanwhile, nothing is dropped, and once delivered it is
// finished and never offered again.
func TestFeederRetriesFullDestination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := spool.NewCrashFS()
		s := testSpool(t, fs)
		defer s.Close()
		if _, err := s.Append(spool.Record{Signal: 2, Items: 3, Payload: rec(7, 100)}); err != nil {
			t.Fatal(err)
		}
		droppedBefore := dropped(t, "undeliverable")
		d := newDest()
		d.full = true
		f, _ := New(feedConfig(), s.Reader("d"), d, nil)
		f.Start()
		defer f.Stop()
		refused := func() int {
			d.mu.Lock()
			defer d.mu.Unlock()
			return len(d.refused)
		}
		// Refused, then offered again after a pause (not at once, in a loop): the second offer is
		// the retry.
		testkit.WaitFor(t, "the first offer", func() bool { return refused() >= 1 })
		synctest.Wait()
		if n := refused(); n != 1 {
			t.Fatalf("offered %d times at once while the destination was full, want one offer, then a pause", n)
		}
		testkit.WaitFor(t, "the feeder to offer the batch again", func() bool { return refused() >= 2 })
		d.mu.Lock()
		d.full = false
		offers := append([]*pipeline.Batch(nil), d.refused...)
		d.mu.Unlock()
		b := d.take(t, 1)[0]
		for i, o := range offers {
			if o != b {
				t.Fatalf("offer %d was another batch than the one delivered", i)
			}
		}
		if got := ids(b, 100); len(got) != 1 || got[0] != 7 || b.Signal != 2 || b.Items != 3 {
			t.Fatalf("batch %v signal %v items %d, want record 7 alone, signal 2, 3 items", got, b.Signal, b.Items)
		}
		if n := s.Reader("d").Unfinished(); n != 1 {
			t.Fatalf("%d records unfinished while the batch is in the destination's hands, want 1", n)
		}
		b.Done(true)
		if n := s.Reader("d").Unfinished(); n != 0 {
			t.Fatalf("%d records unfinished after delivery", n)
		}
		if h := f.HeldBytes(); h != 0 {
			t.Fatalf("held %d bytes after delivery", h)
		}
		if n := dropped(t, "undeliverable") - droppedBefore; n != 0 {
			t.Fatalf("%v records dropped while the destination was full", n)
		}
		// The next record comes alone: the delivered one is not offered again.
		if _, err := s.Append(spool.Record{Signal: 2, Items: 1, Payload: rec(8, 100)}); err != nil {
			t.Fatal(err)
		}
		b = d.take(t, 1)[0]
		if got := ids(b, 100); len(got) != 1 || got[0] != 8 {
			t.Fatalf("next batch holds %v, want record 8 alone", got)
		}
		b.Done(true)
		d.mu.Lock()
		refusals := len(d.refused)
		d.mu.Unlock()
		t.Logf("offered %d times while full, then delivered once", refusals)
	})
}
