package spool

import (
	"errors"
	"testing"

	"github.com/otlpgate/otlpgate/pool"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func droppedFor(dest string, reason DropReason) float64 {
	return testutil.ToFloat64(droppedRecords.WithLabelValues(dest, dropReasonNames[reason]))
}

// readN reads n records of r and returns their positions.
func readN(t *testing.T, r *Reader, n int) []Pos {
	t.Helper()
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	var ps []Pos
	for range n {
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if err != nil {
			t.Fatalf("%s: Next: %v", r.Name(), err)
		}
		ps = append(ps, e.Pos)
	}
	return ps
}

// A destination removed while the spool runs (Away) used to hold the spool for good: the
// checkpoint took the lowest position over every reader, the removed one's included, which
// never moved again, and a full spool refused every append though the destination still
// configured had caught up. A removed destination that owes nothing is released at the next
// checkpoint; one that owes records holds them until -spool.removed-hold, then what it still
// owed (read and unfinished, and unread before it went away) is counted as removed, and the
// spool is free again.
func TestRemovedDestinationHoldIsBounded(t *testing.T) {
	cfg := testConfig(SyncInterval)
	cfg.MaxBytes = 8 << 10 // eight segments
	cfg.RemovedHoldBytes = 1 << 30
	fs := NewCrashFS()
	s := mustOpen(t, cfg, fs, "a", "b", "c")
	defer s.Close()
	a, b, c := reader(t, s, "a"), reader(t, s, "b"), reader(t, s, "c")
	cRemoved, bRejected := droppedFor("c", dropRemoved), droppedFor("b", DropRejected)
	appendN(t, s, 0, 20)
	drain(t, a, true)
	drain(t, c, true)
	held := readN(t, b, 5)
	b.Finish(held[0])
	b.Finish(held[2])
	// Removed by a reload: c caught up and owes nothing; b owes 18 (3 read, 15 not).
	b.Away()
	c.Away()
	appendN(t, s, 20, 30) // neither's
	drain(t, a, true)
	removed := delta(droppedRecords.WithLabelValues("b", "removed"), func() {
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	})
	if s.Reader("c") != nil || s.Reader("b") == nil {
		t.Fatalf("after a checkpoint: c released %v (owes nothing), b kept %v (owes 18, within its hold)",
			s.Reader("c") == nil, s.Reader("b") != nil)
	}
	if got := droppedFor("c", dropRemoved) - cRemoved; removed != 0 || got != 0 {
		t.Errorf("counted as removed before any hold ended: b %v, c %v", removed, got)
	}
	if _, err := fs.ReadFile(testDir + "/" + cursorName("c")); err == nil {
		t.Error("c's cursor is still on disk after its release")
	}

	// The spool fills behind b's hold.
	var err error
	for i := 30; i < 200 && err == nil; i++ {
		_, err = s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)})
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("the spool never filled behind the removed destination: %v", err)
	}
	drain(t, a, true)

	// b's hold ends: what it still owed is counted, and the spool takes appends again.
	// (The checkpoint the refused append kicked may run meanwhile and release it first.)
	removed = delta(droppedRecords.WithLabelValues("b", "removed"), func() {
		b.mu.Lock()
		b.mu.awaySince = b.mu.awaySince.Add(-cfg.RemovedHold)
		b.mu.Unlock()
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	})
	if removed != 18 {
		t.Errorf("b's release counted %v records as removed, want 18 (3 read and unfinished, 15 unread)", removed)
	}
	if s.Reader("b") != nil {
		t.Fatal("b not released past its hold")
	}
	if _, err := fs.ReadFile(testDir + "/" + cursorName("b")); err == nil {
		t.Error("b's cursor is still on disk after its release")
	}
	if got := s.Bytes(); got > cfg.SegmentBytes {
		t.Errorf("%d bytes still spooled after the release, with a caught up", got)
	}
	appendN(t, s, 1000, 1010)
	// What b's drain finishes afterwards changes nothing.
	b.Finish(held[1])
	b.Drop(held[3], DropRejected)
	if got := droppedFor("b", DropRejected) - bRejected; got != 0 {
		t.Errorf("a drop after the release counted %v", got)
	}

	// Back later (AddReader), it is new: it reads what is appended from then on.
	nb, err := s.AddReader("b")
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 2000, 2003)
	if got := drain(t, nb, true); len(got) != 3 || got[0] != 2000 {
		t.Errorf("b back after its release read %v, want 2000..2002", got)
	}
}

// The byte bound releases a removed destination before its time does, so that it never
// holds more than -spool.removed-hold-bytes.
func TestRemovedDestinationByteBound(t *testing.T) {
	cfg := testConfig(SyncInterval)
	cfg.MaxBytes = 16 << 10
	cfg.RemovedHoldBytes = 4 << 10
	s := mustOpen(t, cfg, NewCrashFS(), "a", "b")
	defer s.Close()
	a, b := reader(t, s, "a"), reader(t, s, "b")
	before := droppedFor("b", dropRemoved)
	appendN(t, s, 0, 10)
	b.Away()
	drain(t, a, true)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if s.Reader("b") == nil {
		t.Fatal("released within its bounds")
	}
	var err error
	for i := 10; i < 1000 && s.Reader("b") != nil && err == nil; i++ {
		_, err = s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)})
		drain(t, a, true)
		err = errors.Join(err, s.Checkpoint())
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Reader("b") != nil {
		t.Fatal("never released past -spool.removed-hold-bytes")
	}
	if got := droppedFor("b", dropRemoved) - before; got != 10 {
		t.Errorf("dropped removed %v, want the 10 records b owed", got)
	}
	if got := s.Bytes(); got > cfg.RemovedHoldBytes+cfg.SegmentBytes {
		t.Errorf("%d bytes spooled after the release", got)
	}
}

// A start that does not list a destination used to delete its backlog as finished, counting
// nothing (a renamed destination's records were lost silently): it counts what the destination
// still owed as released, from its cursor, and when it was removed while the spool ran, only
// up to where it went away. ReleasedAtOpen reports it.
func TestReleasedAtOpenCounted(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncInterval), fs, "a", "b", "c")
	appendN(t, s, 0, 12)
	drain(t, reader(t, s, "a"), true)
	b := reader(t, s, "b")
	ps := readN(t, b, 4)
	b.Finish(ps[0])
	b.Finish(ps[1]) // owes 10: two read and unfinished, eight unread
	c := reader(t, s, "c")
	c.Finish(readN(t, c, 1)[0])
	c.Away() // owes 11
	appendN(t, s, 12, 20)
	drain(t, reader(t, s, "a"), true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bBefore, cBefore := droppedFor("b", dropReleased), droppedFor("c", dropReleased)
	s = mustOpen(t, testConfig(SyncInterval), fs, "a")
	defer s.Close()
	if got := droppedFor("b", dropReleased) - bBefore; got != 18 {
		t.Errorf("b: %v counted as released, want 18 (10 owed before, 8 since)", got)
	}
	if got := droppedFor("c", dropReleased) - cBefore; got != 11 {
		t.Errorf("c: %v counted as released, want 11 (what it owed when it went away)", got)
	}
	want := []Released{{"b", 18}, {"c", 11}}
	if got := s.ReleasedAtOpen(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ReleasedAtOpen %v, want %v", got, want)
	}
	// Released for good: the next start counts nothing more.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, testConfig(SyncInterval), fs, "a")
	defer s2.Close()
	if got := s2.ReleasedAtOpen(); len(got) != 0 {
		t.Errorf("second start released %v again", got)
	}
}
