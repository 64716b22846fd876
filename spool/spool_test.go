package spool

import (
	"errors"
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/pool"
)

func TestRoundTripEveryMode(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := NewCrashFS()
			s := mustOpen(t, testConfig(mode), fs, "a", "b")
			appendN(t, s, 0, 30) // eight records a segment: four segments
			if got := segFiles(t, fs); len(got) != 4 {
				t.Fatalf("segments %v, want 4", got)
			}
			a, b := reader(t, s, "a"), reader(t, s, "b")
			if got := drain(t, a, true); !slices.Equal(got, seq(0, 30)) {
				t.Fatalf("a read %v", got)
			}
			if got := drain(t, b, false); !slices.Equal(got, seq(0, 30)) {
				t.Fatalf("b read %v", got)
			}
			// b holds everything: nothing may go.
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if got := segFiles(t, fs); len(got) != 4 {
				t.Fatalf("segments after checkpoint with b unfinished: %v", got)
			}
			// b finishes the first 20: the two segments holding records 0-15 go.
			buf := pool.GetBytes(0)
			defer pool.PutBytes(buf)
			s2 := mustReopen(t, s, testConfig(mode), fs, "a", "b")
			b = reader(t, s2, "b")
			for i := range 20 {
				*buf = (*buf)[:0]
				e, err := b.Next(buf)
				if err != nil || idOf(t, *buf) != i {
					t.Fatalf("b replay %d: %v %q", i, err, *buf)
				}
				b.Finish(e.Pos)
			}
			if err := s2.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if got := segFiles(t, fs); len(got) != 2 {
				t.Fatalf("segments after b finished 0-19: %v, want 2", got)
			}
			if got := drain(t, reader(t, s2, "a"), true); got != nil {
				t.Fatalf("a read again after a clean restart: %v", got)
			}
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustReopen(t *testing.T, s *Spool, cfg Config, fs FS, dests ...string) *Spool {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return mustOpen(t, cfg, fs, dests...)
}

func TestOutOfOrderFinishReplaysFromLowestUnfinished(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncAlways), fs, "a")
	appendN(t, s, 0, 6)
	r := reader(t, s, "a")
	buf := pool.GetBytes(0)
	defer pool.PutBytes(buf)
	var pos []Pos
	for range 6 {
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, e.Pos)
	}
	r.Finish(pos[0])
	r.Finish(pos[3])
	r.Drop(pos[4], DropRejected)
	r.Finish(pos[5])
	if r.Position() != pos[1] || r.Unfinished() != 2 {
		t.Fatalf("position %v unfinished %d, want %v and 2", r.Position(), r.Unfinished(), pos[1])
	}
	r.Finish(pos[1])
	if r.Position() != pos[2] {
		t.Fatalf("position %v, want %v", r.Position(), pos[2])
	}
	s2 := mustReopen(t, s, testConfig(SyncAlways), fs, "a")
	defer s2.Close()
	var got []int
	n := delta(replayedRecords.WithLabelValues("a"), func() { got = drain(t, reader(t, s2, "a"), true) })
	if !slices.Equal(got, []int{2, 3, 4, 5}) || n != 4 {
		t.Fatalf("replayed %v (%v counted), want [2 3 4 5] (4)", got, n)
	}
}

func TestDestinationsRemovedAndAdded(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncAlways), fs, "a", "b")
	appendN(t, s, 0, 12)
	drain(t, reader(t, s, "a"), true)
	s = mustReopen(t, s, testConfig(SyncAlways), fs, "a", "c")
	if _, err := fs.ReadFile(testDir + "/" + cursorName("b")); err == nil {
		t.Fatal("b's cursor survived b's removal")
	}
	// b held records 0-11; with b gone, only the segment being written may stay.
	if got := segFiles(t, fs); len(got) != 0 {
		t.Fatalf("segments kept for a removed destination: %v", got)
	}
	appendN(t, s, 12, 14)
	if got := drain(t, reader(t, s, "c"), true); !slices.Equal(got, []int{12, 13}) {
		t.Fatalf("new destination read %v, want only what came after it", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFullRefuse(t *testing.T) {
	fs := NewCrashFS()
	cfg := testConfig(SyncNone)
	cfg.MaxBytes = 2048
	s := mustOpen(t, cfg, fs, "a")
	defer s.Close()
	// 16 header bytes per segment and 116 per record, 8 records a segment: records 0-16 take
	// 944+944+132 bytes, and record 17 would pass 2048.
	appendN(t, s, 0, 17)
	var err error
	n := delta(appendErrFull, func() { _, err = s.Append(Record{Items: 17, Payload: payload(17)}) })
	if !errors.Is(err, ErrFull) || n != 1 {
		t.Fatalf("Append on a full spool: %v (counted %v), want ErrFull", err, n)
	}
	drain(t, reader(t, s, "a"), true)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 17, 19)
	if got := drain(t, reader(t, s, "a"), true); !slices.Equal(got, []int{17, 18}) {
		t.Fatalf("after space was freed read %v", got)
	}
}

func TestFullDropOldest(t *testing.T) {
	fs := NewCrashFS()
	cfg := testConfig(SyncNone)
	cfg.MaxBytes = 2048
	cfg.Full = FullDropOldest
	s := mustOpen(t, cfg, fs, "a", "b")
	defer s.Close()
	a := reader(t, s, "a")
	// a reads and finishes 0-2 before the drop; b reads nothing.
	appendN(t, s, 0, 3)
	drain(t, a, true)
	var dropped [2]float64
	dropped[0] = delta(a.dropped[dropOldest], func() {
		dropped[1] = delta(reader(t, s, "b").dropped[dropOldest], func() { appendN(t, s, 3, 20) })
	})
	// Records 0-7 filled segment 1, which went when record 17 needed room.
	if dropped != [2]float64{5, 8} {
		t.Fatalf("dropped for a, b = %v, want [5 8]", dropped)
	}
	if got := drain(t, a, true); !slices.Equal(got, seq(8, 20)) {
		t.Fatalf("a read %v", got)
	}
	if got := drain(t, reader(t, s, "b"), true); !slices.Equal(got, seq(8, 20)) {
		t.Fatalf("b read %v", got)
	}
}
