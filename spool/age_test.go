package spool

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The age of the oldest unfinished record grows while a destination holds it, follows the
// destination as it finishes records in order, and falls to 0 once every destination caught up;
// the gauge reads the same.
func TestOldestUnfinishedAge(t *testing.T) {
	s := mustOpen(t, testConfig(SyncInterval), NewCrashFS(), "a", "b")
	defer s.Close()
	a, b := s.Reader("a"), s.Reader("b")
	within := func(what string, got, lo time.Duration) {
		t.Helper()
		if got < lo || got >= lo+2*ageResolution {
			t.Errorf("%s: age %v, want %v to %v", what, got, lo, lo+2*ageResolution)
		}
	}
	if got := s.OldestUnfinishedAge(time.Now()); got != 0 {
		t.Fatalf("empty spool: age %v", got)
	}
	if _, err := s.Append(Record{Items: 1, Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	within("just appended", s.OldestUnfinishedAge(time.Now()), 0)
	within("30s later", s.OldestUnfinishedAge(time.Now().Add(30*time.Second)), 30*time.Second)

	// Ten seconds of the spool's life pass; then a second record.
	s.mu.Lock()
	s.opened = s.opened.Add(-10 * time.Second)
	s.mu.Unlock()
	if _, err := s.Append(Record{Items: 1, Payload: payload(2)}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 256)
	read := func(r *Reader) Entry {
		t.Helper()
		e, err := r.Next(&buf)
		if err != nil {
			t.Fatal(err)
		}
		buf = buf[:0]
		return e
	}
	a1, a2 := read(a), read(a)
	a.Finish(a1.Pos)
	a.Finish(a2.Pos)
	b1 := read(b)
	within("b holds the first record", s.OldestUnfinishedAge(time.Now()), 10*time.Second)
	within("the gauge", time.Duration(gaugeValue(t, "otlpgate_spool_oldest_unfinished_age_seconds")*float64(time.Second)), 10*time.Second)
	b.Finish(b1.Pos)
	within("b finished the first: the second is the oldest", s.OldestUnfinishedAge(time.Now()), 0)
	b.Finish(read(b).Pos)
	if got := s.OldestUnfinishedAge(time.Now()); got != 0 {
		t.Errorf("every destination caught up: age %v, want 0", got)
	}
	if got := gaugeValue(t, "otlpgate_spool_oldest_unfinished_age_seconds"); got != 0 {
		t.Errorf("gauge %v, want 0", got)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	marks := len(s.mu.ages)
	s.mu.Unlock()
	if marks != 1 {
		t.Errorf("%d age marks after every record was finished and checkpointed, want 1", marks)
	}
}

// Records recovered at Open count from Open: the process that appended them took its clock
// with it.
func TestOldestUnfinishedAgeAfterRestart(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncInterval), fs, "a")
	if _, err := s.Append(Record{Items: 1, Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.opened = s.opened.Add(-time.Hour) // appended an hour into the first life
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testConfig(SyncInterval), fs, "a")
	defer s.Close()
	if got := s.OldestUnfinishedAge(time.Now().Add(5 * time.Second)); got < 5*time.Second || got >= 7*time.Second {
		t.Errorf("recovered record 5s after Open: age %v", got)
	}
}

// The index stays bounded, keeping the mark of the oldest records, however long appends go on
// while a destination holds everything.
func TestAgeMarksBounded(t *testing.T) {
	s := &Spool{opened: time.Now()}
	s.mu.ages = []ageMark{{pos: 0, at: 0}}
	for i := 1; i <= 3*maxAgeMarks; i++ {
		s.opened = s.opened.Add(-ageResolution)
		s.markAgeLocked(makePos(1, int64(16+i)))
	}
	if n := len(s.mu.ages); n > maxAgeMarks || n < maxAgeMarks/2 {
		t.Fatalf("%d marks", n)
	}
	if s.mu.ages[0] != (ageMark{pos: 0, at: 0}) {
		t.Errorf("first mark %+v, want the one at Open", s.mu.ages[0])
	}
	for i := 1; i < len(s.mu.ages); i++ {
		if s.mu.ages[i].pos <= s.mu.ages[i-1].pos || s.mu.ages[i].at <= s.mu.ages[i-1].at {
			t.Fatalf("marks out of order at %d: %+v %+v", i, s.mu.ages[i-1], s.mu.ages[i])
		}
	}
}

func gaugeValue(t *testing.T, name string) float64 {
	t.Helper()
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A spool that holds only cursors after a restart is behind on nothing: a clean stop with
// everything finished, an idle start that deletes the last (finished) segment, then another
// start. The cursors point at the end of a segment that is gone, below the tail of the new
// start, with no record in between; the age stays 0, as do the bytes on disk.
func TestOldestUnfinishedAgeOnlyCursors(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncInterval), fs, "a", "b")
	appendN(t, s, 0, 3)
	drain(t, s.Reader("a"), true)
	drain(t, s.Reader("b"), true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for life := range 2 {
		s = mustOpen(t, testConfig(SyncInterval), fs, "a", "b")
		if got := s.OldestUnfinishedAge(time.Now().Add(time.Hour)); got != 0 {
			t.Errorf("start %d, %d bytes on disk: age %v an hour after Open, want 0", life+2, s.Bytes(), got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A record appended afterwards is dated as usual.
	s = mustOpen(t, testConfig(SyncInterval), fs, "a", "b")
	defer s.Close()
	appendN(t, s, 3, 4)
	if got := s.OldestUnfinishedAge(time.Now().Add(30 * time.Second)); got < 30*time.Second || got >= 32*time.Second {
		t.Errorf("a record appended, 30s later: age %v", got)
	}
}
