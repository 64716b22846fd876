//go:build !race

package spool

import (
	"testing"
)

// TestAppendAllocs: in steady state (no rotation) an Append in SyncNone mode allocates nothing.
// sync.Pool and the race detector do not mix, hence !race.
func TestAppendAllocs(t *testing.T) {
	cfg := testConfig(SyncNone)
	cfg.SegmentBytes = 64 << 20
	cfg.MaxBytes = 1 << 30
	s := mustOpen(t, cfg, NewCrashFS(), "a")
	defer s.Close()
	p := payload(1)
	appendN(t, s, 0, 1)
	got := testing.AllocsPerRun(1000, func() {
		if _, err := s.Append(Record{Items: 1, Payload: p}); err != nil {
			t.Fatal(err)
		}
	})
	if got != 0 {
		t.Fatalf("Append: %v allocs/op, want 0", got)
	}
}

// TestAppendFullAllocs: an Append that finds the spool full, looks for finished segments to
// free (reclaim) and finds none, is refused without allocating.
func TestAppendFullAllocs(t *testing.T) {
	cfg := testConfig(SyncNone)
	cfg.MaxBytes = 2048
	s := mustOpen(t, cfg, NewCrashFS(), "a")
	defer s.Close()
	appendN(t, s, 0, 17) // a reads none of them
	p := payload(17)
	got := testing.AllocsPerRun(1000, func() {
		if _, err := s.Append(Record{Items: 17, Payload: p}); err != ErrFull {
			t.Fatal(err)
		}
	})
	if got != 0 {
		t.Fatalf("Append on a full spool: %v allocs/op, want 0", got)
	}
}
