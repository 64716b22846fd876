package spool

import (
	"errors"
	"slices"
	"testing"
)

// crashScenario opens a spool, appends records across three segments with a checkpoint that
// deletes a finished segment in the middle, and closes. It stops at the first error, which is
// the simulated crash, and returns the records whose Append succeeded and the highest record
// both destinations had finished (then checkpointed), after which segment 1 is deleted.
func crashScenario(fs *CrashFS, mode SyncMode) (acked []int, aDone int) {
	aDone = -1
	s, err := Open(testConfig(mode), fs, []string{"a", "b"})
	if err != nil {
		return nil, aDone
	}
	defer func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrCrashed) {
			panic(err)
		}
	}()
	buf := make([]byte, 0, 128)
	for i := range 20 {
		if _, err := s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)}); err != nil {
			return acked, aDone
		}
		acked = append(acked, i)
		if i == 9 {
			for _, name := range []string{"a", "b"} {
				r := s.Reader(name)
				for {
					buf = buf[:0]
					e, err := r.Next(&buf)
					if err != nil {
						break
					}
					r.Finish(e.Pos)
				}
			}
			aDone = 9 // finished: a restart may replay them, need not
			if err := s.Checkpoint(); err != nil {
				return acked, aDone
			}
		}
	}
	return acked, aDone
}

// TestCrashAtEveryOperation runs the scenario once to count its file-system operations, then
// once per operation k, crashing right after the k-th: the spool must reopen cleanly and hold
// every record an Append acknowledged (SyncAlways) or every record a sync covered (the
// others), in order, and reopen cleanly a second time.
func TestCrashAtEveryOperation(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := NewCrashFS()
			acked, _ := crashScenario(fs, mode)
			if !slices.Equal(acked, seq(0, 20)) {
				t.Fatalf("clean run acked %v", acked)
			}
			if got := segFiles(t, fs); len(got) != 2 || got[0] != segmentName(2) {
				t.Fatalf("clean run left segments %v, want 2 and 3", got)
			}
			total := fs.Ops()
			if total < 40 {
				t.Fatalf("only %d operations counted", total)
			}
			for k := 1; k <= total; k++ {
				fs := NewCrashFS()
				fs.CrashAfter(k)
				acked, aDone := crashScenario(fs, mode)
				fs.Crash()
				checkAfterCrash(t, fs, mode, k, acked, aDone)
			}
		})
	}
}

func checkAfterCrash(t *testing.T, fs *CrashFS, mode SyncMode, k int, acked []int, aDone int) {
	t.Helper()
	s, err := Open(testConfig(mode), fs, []string{"a", "b"})
	if err != nil {
		t.Fatalf("crash after op %d: reopen: %v", k, err)
	}
	gotA := drain(t, s.Reader("a"), false)
	gotB := drain(t, s.Reader("b"), false)
	if err := s.Close(); err != nil {
		t.Fatalf("crash after op %d: close: %v", k, err)
	}
	for name, got := range map[string][]int{"a": gotA, "b": gotB} {
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("crash after op %d: %s read %v: out of order or twice", k, name, got)
		}
	}
	var want []int
	switch mode {
	case SyncAlways:
		want = acked // every acknowledged record, and nothing is synced that was not written
	case SyncInterval:
		// Only rotations sync in this scenario (the interval is an hour): an acknowledged
		// record 8 or 16 opened a segment after syncing the one before.
		synced := 0
		for _, first := range []int{8, 16} {
			if slices.Contains(acked, first) {
				synced = first
			}
		}
		want = seq(0, synced)
	}
	for _, id := range want {
		if id > aDone && !slices.Contains(gotB, id) {
			t.Fatalf("crash after op %d: b lost record %d (acked %v, read %v)", k, id, acked, gotB)
		}
		if id > aDone && !slices.Contains(gotA, id) {
			t.Fatalf("crash after op %d: a lost record %d (finished to %d, read %v)", k, id, aDone, gotA)
		}
	}
	if len(gotB) > 0 && gotB[len(gotB)-1] >= 20 {
		t.Fatalf("crash after op %d: b read records never appended: %v", k, gotB)
	}
	// The second start after the crash sees the same log.
	s, err = Open(testConfig(mode), fs, []string{"a", "b"})
	if err != nil {
		t.Fatalf("crash after op %d: second reopen: %v", k, err)
	}
	again := drain(t, s.Reader("b"), false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, gotB) {
		t.Fatalf("crash after op %d: second reopen read %v, first %v", k, again, gotB)
	}
}

// TestIntervalLosesAtMostTheWindow: a power loss in SyncInterval mode loses what was appended
// since the last sync, and nothing before it.
func TestIntervalLosesAtMostTheWindow(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncInterval), fs, "a")
	appendN(t, s, 0, 5)
	if err := s.sync(); err != nil { // the interval tick
		t.Fatal(err)
	}
	appendN(t, s, 5, 7)
	abandon(s)
	fs.Crash()
	s = mustOpen(t, testConfig(SyncInterval), fs, "a")
	defer s.Close()
	if got := drain(t, s.Reader("a"), true); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("after a power loss read %v, want records 0-4", got)
	}
}

// TestProcessCrashLosesNothing: kill -9 keeps what write(2) handed the kernel, in every mode.
func TestProcessCrashLosesNothing(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := NewCrashFS()
			s := mustOpen(t, testConfig(mode), fs, "a")
			appendN(t, s, 0, 11)
			abandon(s) // no Close, no Crash: the page cache survives a process crash
			s = mustOpen(t, testConfig(mode), fs, "a")
			defer s.Close()
			if got := drain(t, s.Reader("a"), true); !slices.Equal(got, seq(0, 11)) {
				t.Fatalf("after kill -9 read %v", got)
			}
		})
	}
}
