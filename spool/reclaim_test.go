package spool

import (
	"errors"
	"slices"
	"testing"
)

// A full spool whose records every destination finished used to refuse the next append: only
// the checkpoint freed finished segments, and it ran after the refusal (kicked by it) or at its
// interval, so a client saw backpressure although every destination had caught up. Here no
// checkpoint runs at all (the interval is an hour and nothing kicks one): a and b finished
// everything, c was removed owing nothing, and the append that finds the spool full frees the
// finished segments itself and is taken. What a destination has not finished still holds.
func TestFullFreesFinishedBeforeRefusing(t *testing.T) {
	fs := NewCrashFS()
	cfg := testConfig(SyncNone)
	cfg.MaxBytes = 2048
	s := mustOpen(t, cfg, fs, "a", "b", "c")
	defer s.Close()
	a, b, c := reader(t, s, "a"), reader(t, s, "b"), reader(t, s, "c")
	appendN(t, s, 0, 3)
	drain(t, c, true)
	c.Away()
	// 16 header bytes per segment and 116 per record, 8 records a segment: records 0-16 take
	// 944+944+132 bytes, and record 17 would pass 2048.
	appendN(t, s, 3, 17)
	if got := drain(t, a, true); !slices.Equal(got, seq(0, 17)) {
		t.Fatalf("a read %v", got)
	}
	drain(t, b, true)

	var err error
	var full, freed float64
	freed = delta(segDeletedFinished, func() {
		full = delta(appendErrFull, func() { _, err = s.Append(Record{Signal: 17 % 3, Items: 17, Payload: payload(17)}) })
	})
	if err != nil || full != 0 {
		t.Fatalf("Append on a spool full of finished records: %v (%v counted as full), want it taken", err, full)
	}
	// Segments 1 and 2 (records 0-15); segment 3 is the one being written.
	if freed != 2 || s.Bytes() != 16+2*116 {
		t.Fatalf("%v segments freed, %d bytes spooled; want 2 and %d", freed, s.Bytes(), 16+2*116)
	}
	if got := segFiles(t, fs); len(got) != 1 {
		t.Fatalf("segment files left: %v", got)
	}
	for _, r := range []*Reader{a, b} {
		if got := drain(t, r, true); !slices.Equal(got, []int{17}) {
			t.Fatalf("%s read %v after the append, want [17]", r.Name(), got)
		}
	}

	// b finishes what follows, a does not: what a owes stays, and the spool refuses again.
	for i := 18; ; i++ {
		if i == 100 {
			t.Fatal("the spool never filled behind a")
		}
		_, err = s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)})
		if err != nil {
			break
		}
		drain(t, b, true)
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("Append behind an unfinished destination: %v, want ErrFull", err)
	}
	if got := drain(t, a, true); !slices.Equal(got, seq(18, 18+len(got))) || len(got) < 15 {
		t.Fatalf("a read %v after the refusal", got)
	}
}
