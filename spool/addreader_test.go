package spool

import (
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/pool"
)

// A destination added while the spool runs reads every record appended after AddReader
// returned and none from before; its cursor is durable at once, so that after a kill -9 a start
// that lists it replays what was appended for it, even though no checkpoint ran in between.
// Asking again returns the same reader.
func TestAddReaderTakesWhatFollows(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := NewCrashFS()
			s := mustOpen(t, testConfig(mode), fs, "a")
			appendN(t, s, 0, 12)
			b, err := s.AddReader("b")
			if err != nil {
				t.Fatal(err)
			}
			if again, err := s.AddReader("b"); err != nil || again != b {
				t.Fatalf("AddReader again: %p %v, want the same reader %p", again, err, b)
			}
			if got := drain(t, b, false); len(got) != 0 {
				t.Fatalf("b read %v, appended before it was added", got)
			}
			appendN(t, s, 12, 20)
			if got := drain(t, b, false); !slices.Equal(got, seq(12, 20)) {
				t.Fatalf("b read %v, want 12..19", got)
			}
			if got := drain(t, reader(t, s, "a"), false); !slices.Equal(got, seq(0, 20)) {
				t.Fatalf("a read %v, want 0..19", got)
			}
			if mode != SyncNone {
				if err := s.sync(); err != nil {
					t.Fatal(err)
				}
			}
			abandon(s)
			fs.Crash()

			s = mustOpen(t, testConfig(mode), fs, "a", "b")
			defer s.Close()
			want := seq(12, 20)
			if mode == SyncNone {
				want = nil // nothing was made durable
			}
			if got := drain(t, reader(t, s, "b"), false); !slices.Equal(got, want) {
				t.Fatalf("after the crash b read %v, want %v", got, want)
			}
		})
	}
}

// Rewind hands out again what a destination read and left unfinished, in order, and passes
// over what it finished out of order or dropped: nothing twice, nothing lost. A second
// Rewind after more reading keeps what the first left to skip.
func TestRewindHandsOutTheUnfinished(t *testing.T) {
	s := mustOpen(t, testConfig(SyncNone), NewCrashFS(), "a")
	defer s.Close()
	r := reader(t, s, "a")
	appendN(t, s, 0, 20)
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	pos := map[int]Pos{}
	next := func() int {
		t.Helper()
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		id := idOf(t, *buf)
		pos[id] = e.Pos
		return id
	}
	for range 12 {
		next()
	}
	// Finished out of order: 2, 5, 9; dropped: 7; the rest of 0..11 is left unfinished.
	for _, id := range []int{2, 5, 9} {
		r.Finish(pos[id])
	}
	r.Drop(pos[7], DropRejected)
	r.Rewind()
	if p := r.Position(); p != pos[0] {
		t.Fatalf("durable position %v after Rewind, want record 0's %v", p, pos[0])
	}
	var got []int
	for range 4 { // 0, 1, 3, 4
		got = append(got, next())
	}
	r.Finish(pos[0])
	r.Rewind() // 1, 3, 4 again; 5, 7, 9 still passed over
	got = append(got, drain(t, r, true)...)
	want := []int{0, 1, 3, 4, 1, 3, 4, 6, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	if !slices.Equal(got, want) {
		t.Fatalf("read %v after the rewinds, want %v", got, want)
	}
	if r.Unfinished() != 0 {
		t.Fatalf("%d records unfinished after draining", r.Unfinished())
	}
	r.Rewind() // nothing unfinished: nothing to hand out again
	if got := drain(t, r, true); len(got) != 0 {
		t.Fatalf("a rewind with nothing unfinished handed out %v", got)
	}
}

// A destination removed while otlpgate runs (Away) and added again (Back) is owed what was
// appended before it left and after it came back, not what was appended in between: after the
// Rewind it reads what it left unfinished, then passes over the gap. The others read all.
func TestAwayBackPassesOverTheGap(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			s := mustOpen(t, testConfig(mode), NewCrashFS(), "a", "b")
			defer s.Close()
			b := reader(t, s, "b")
			appendN(t, s, 0, 10)
			buf := pool.GetBytes(pool.MinSize)
			defer pool.PutBytes(buf)
			for i := range 6 { // read 0..5, finish the even ones
				*buf = (*buf)[:0]
				e, err := b.Next(buf)
				if err != nil {
					t.Fatal(err)
				}
				if i%2 == 0 {
					b.Finish(e.Pos)
				}
			}
			b.Away()
			appendN(t, s, 10, 30) // over several segments
			b.Back()
			appendN(t, s, 30, 35)
			b.Rewind()
			want := append([]int{1, 3, 5, 6, 7, 8, 9}, seq(30, 35)...)
			if got := drain(t, b, true); !slices.Equal(got, want) {
				t.Fatalf("b read %v, want %v", got, want)
			}
			if got := drain(t, reader(t, s, "a"), true); !slices.Equal(got, seq(0, 35)) {
				t.Fatalf("a read %v", got)
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if got := segFiles(t, s.fs); len(got) > 1 {
				t.Fatalf("segments %v left after both finished everything", got)
			}
		})
	}
}
