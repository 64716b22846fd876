package spool

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/otlpgate/otlpgate/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDropOldestCountsExactlyTheLost: drop-oldest deletes segment 1 (records 0-7) while
// destination a has read 0-4 without finishing them and b has read nothing. The records a
// had not read (5-7) and all of b's (0-7) are lost at once and counted then. The ones a holds
// in memory are not lost yet: those it delivers are never counted, the one it gives up is
// counted under its own reason, and the one still unfinished at Close is counted then, because
// no restart can read it again.
func TestDropOldestCountsExactlyTheLost(t *testing.T) {
	fs := NewCrashFS()
	cfg := testConfig(SyncNone)
	cfg.MaxBytes = 2048
	cfg.Full = FullDropOldest
	s := mustOpen(t, cfg, fs, "a", "b")
	a, b := reader(t, s, "a"), reader(t, s, "b")
	appendN(t, s, 0, 5)
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	var held []Pos
	for range 5 {
		*buf = (*buf)[:0]
		e, err := a.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, e.Pos)
	}
	counters := []prometheus.Counter{a.dropped[dropOldest], b.dropped[dropOldest], a.dropped[DropRejected]}
	var before [3]float64
	for i, c := range counters {
		before[i] = testutil.ToFloat64(c)
	}
	appendN(t, s, 5, 20) // record 17 needs segment 1's room
	for _, p := range held[:3] {
		a.Finish(p) // delivered from memory
	}
	a.Drop(held[3], DropRejected)
	// held[4] stays unfinished, as a batch given up at shutdown leaves it.
	if got := drain(t, a, true); !slices.Equal(got, seq(8, 20)) {
		t.Errorf("a read %v after the drop, want 8-19", got)
	}
	if got := drain(t, b, true); !slices.Equal(got, seq(8, 20)) {
		t.Errorf("b read %v after the drop, want 8-19", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var got [3]float64
	for i, c := range counters {
		got[i] = testutil.ToFloat64(c) - before[i]
	}
	// a: 5-7 unread at the drop, and 4 unfinished at Close; 3 is counted as rejected only.
	if got != [3]float64{4, 8, 1} {
		t.Fatalf("counted drop_oldest a=%v b=%v, rejected a=%v; want 4, 8, 1", got[0], got[1], got[2])
	}
}

// TestDropOldestConcurrentReaderExact: a reader drains while appends overrun the spool with
// drop-oldest. Every record is either read or counted as dropped for it, never both, never
// neither, however the reads and the drops interleave.
func TestDropOldestConcurrentReaderExact(t *testing.T) {
	for round := range 20 {
		fs := NewCrashFS()
		cfg := testConfig(SyncNone)
		cfg.MaxBytes = 3000
		cfg.Full = FullDropOldest
		cfg.TailBytes = 0 // read every record back from the file, the slower path
		s := mustOpen(t, cfg, fs, "a")
		r := reader(t, s, "a")
		const total = 400
		var read []int
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := pool.GetBytes(pool.MinSize)
			defer pool.PutBytes(buf)
			for {
				*buf = (*buf)[:0]
				e, err := r.Next(buf)
				switch {
				case err == nil:
					read = append(read, idOf(t, *buf))
					r.Finish(e.Pos)
					continue
				case !errors.Is(err, ErrEmpty):
					t.Error(err)
					return
				}
				select {
				case <-stop:
					return
				case <-r.Ready():
				}
			}
		}()
		dropped := delta(r.dropped[dropOldest], func() {
			appendN(t, s, 0, total)
			close(stop)
			wg.Wait()
			read = append(read, drain(t, r, true)...)
		})
		if !slices.IsSorted(read) || len(slices.Compact(slices.Clone(read))) != len(read) {
			t.Fatalf("round %d: read out of order or twice: %v", round, read)
		}
		if got := float64(len(read)) + dropped; got != total {
			t.Fatalf("round %d: %d read + %v counted dropped = %v, want %d", round, len(read), dropped, got, total)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Drop-oldest counts for a destination only the records it would have been handed: not those
// it finished before a Rewind (Next passes over them), nor those appended while it was away
// (they are not its own). Segment 1 (records 0-7) is dropped when record 17 is appended.
func TestDropOldestCountsOnlyWhatTheDestinationIsOwed(t *testing.T) {
	cfg := testConfig(SyncNone)
	cfg.MaxBytes = 2048
	cfg.Full = FullDropOldest
	t.Run("finished before a rewind", func(t *testing.T) {
		s := mustOpen(t, cfg, NewCrashFS(), "a")
		defer s.Close()
		a := reader(t, s, "a")
		appendN(t, s, 0, 6)
		buf := pool.GetBytes(pool.MinSize)
		defer pool.PutBytes(buf)
		var pos []Pos
		for range 6 {
			*buf = (*buf)[:0]
			e, err := a.Next(buf)
			if err != nil {
				t.Fatal(err)
			}
			pos = append(pos, e.Pos)
		}
		a.Finish(pos[1])
		a.Finish(pos[3])
		a.Rewind() // 0, 2, 4, 5 to be handed out again; 1 and 3 delivered
		if got := delta(a.dropped[dropOldest], func() { appendN(t, s, 6, 20) }); got != 6 {
			t.Errorf("drop_oldest counted %v, want 6: records 0, 2, 4, 5, 6, 7, not the delivered 1 and 3", got)
		}
		if got := drain(t, a, true); !slices.Equal(got, seq(8, 20)) {
			t.Errorf("a read %v after the drop, want 8-19", got)
		}
	})
	for _, backFirst := range []bool{false, true} {
		name := map[bool]string{false: "away", true: "back"}[backFirst]
		t.Run(name, func(t *testing.T) {
			s := mustOpen(t, cfg, NewCrashFS(), "a", "b")
			defer s.Close()
			a, b := reader(t, s, "a"), reader(t, s, "b")
			appendN(t, s, 0, 4)
			b.Away()
			appendN(t, s, 4, 8) // not b's
			if backFirst {
				b.Back()
			}
			var da, db float64
			db = delta(b.dropped[dropOldest], func() {
				da = delta(a.dropped[dropOldest], func() { appendN(t, s, 8, 20) })
			})
			if da != 8 || db != 4 {
				t.Errorf("drop_oldest counted %v for a, %v for b; want 8 (0-7) and 4 (0-3: 4-7 were appended while b was away)", da, db)
			}
			b.Back()
			want := seq(8, 20)
			if !backFirst {
				want = nil // all appended while it was away
			}
			if got := drain(t, b, true); !slices.Equal(got, want) {
				t.Errorf("b read %v after the drop, want %v", got, want)
			}
		})
	}
}
