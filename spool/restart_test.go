package spool

import (
	"slices"
	"testing"
)

// dirHighs returns the highest segment sequence number and the highest cursor position the
// spool directory holds (0 for none).
func dirHighs(t *testing.T, fs *CrashFS) (seg uint64, cur Pos) {
	t.Helper()
	names, err := fs.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if q, _, ok := parseSegmentName(n); ok {
			seg = max(seg, q)
		}
		if _, ok := parseCursorName(n); ok {
			b, err := fs.ReadFile(testDir + "/" + n)
			if err != nil {
				t.Fatal(err)
			}
			p, _, err := decodeCursor(b)
			if err != nil {
				t.Fatalf("cursor %s: %v", n, err)
			}
			cur = max(cur, p)
		}
	}
	return seg, cur
}

// TestThreeStartsSecondIdle is the restart a user meets: traffic, a clean stop with
// everything delivered, a start with no traffic, and a start with traffic again. The idle start
// deletes the last segment (every destination finished it) and leaves only cursors, which point
// past every segment number the directory still shows. Every record of the third start must be
// read by every destination, and no segment may go before it is finished.
func TestThreeStartsSecondIdle(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := NewCrashFS()
			cfg := testConfig(mode)
			s := mustOpen(t, cfg, fs, "a", "b")
			appendN(t, s, 0, 20)
			for _, d := range []string{"a", "b"} {
				if got := drain(t, reader(t, s, d), true); !slices.Equal(got, seq(0, 20)) {
					t.Fatalf("first start: %s read %v", d, got)
				}
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			s = mustReopen(t, s, cfg, fs, "a", "b") // the idle start
			s = mustReopen(t, s, cfg, fs, "a", "b")
			defer s.Close()

			appendN(t, s, 20, 40)
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if got := len(segFiles(t, fs)); got != 3 {
				t.Fatalf("third start: %d segments after appending 20 records, want 3", got)
			}
			if got := drain(t, reader(t, s, "a"), true); !slices.Equal(got, seq(20, 40)) {
				t.Fatalf("third start: a read %v, want 20-39", got)
			}
			// b has read nothing: every segment must stay.
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if got := len(segFiles(t, fs)); got != 3 {
				t.Fatalf("third start: %d segments after only a finished, want 3", got)
			}
			if got := drain(t, reader(t, s, "b"), false); !slices.Equal(got, seq(20, 40)) {
				t.Fatalf("third start: b read %v, want 20-39", got)
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if got := len(segFiles(t, fs)); got != 3 {
				t.Fatalf("third start: %d segments with b's reads unfinished, want 3", got)
			}
		})
	}
}

// TestSequenceAboveEverythingOnDisk opens the spool over each kind of directory a life can
// leave (cursors only, segments only, both, neither) and checks that the first new record lands
// above every segment and every cursor there, and that every destination reads what follows.
func TestSequenceAboveEverythingOnDisk(t *testing.T) {
	// Each setup leaves the directory in one state and returns the destinations of the next
	// start.
	setups := []struct {
		name  string
		setup func(t *testing.T, fs *CrashFS) []string
	}{
		{"neither", func(t *testing.T, fs *CrashFS) []string { return []string{"a"} }},
		{"both", func(t *testing.T, fs *CrashFS) []string {
			s := mustOpen(t, testConfig(SyncAlways), fs, "a", "b")
			appendN(t, s, 0, 20)
			drain(t, reader(t, s, "a"), true)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return []string{"a", "b"}
		}},
		{"cursors only", func(t *testing.T, fs *CrashFS) []string {
			s := mustOpen(t, testConfig(SyncAlways), fs, "a")
			appendN(t, s, 0, 20)
			drain(t, reader(t, s, "a"), true)
			s = mustReopen(t, s, testConfig(SyncAlways), fs, "a")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if n := len(segFiles(t, fs)); n != 0 {
				t.Fatalf("setup left %d segments", n)
			}
			return []string{"a", "b"}
		}},
		{"segments only", func(t *testing.T, fs *CrashFS) []string {
			s := mustOpen(t, testConfig(SyncAlways), fs, "a")
			appendN(t, s, 0, 20)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fs.Remove(testDir + "/" + cursorName("a")); err != nil {
				t.Fatal(err)
			}
			return []string{"c"}
		}},
	}
	for _, tc := range setups {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewCrashFS()
			if err := fs.MkdirAll(testDir); err != nil {
				t.Fatal(err)
			}
			dests := tc.setup(t, fs)
			highSeg, highCur := dirHighs(t, fs)
			s := mustOpen(t, testConfig(SyncAlways), fs, dests...)
			defer s.Close()
			p, err := s.Append(Record{Signal: 100 % 3, Items: 100, Payload: payload(100)})
			if err != nil {
				t.Fatal(err)
			}
			if p.Segment() <= highSeg || p <= highCur {
				t.Fatalf("first new record at %v; the directory held segment %d and a cursor at %v", p, highSeg, highCur)
			}
			appendN(t, s, 101, 110)
			for _, d := range dests {
				got := drain(t, reader(t, s, d), true)
				if i := slices.Index(got, 100); i < 0 || !slices.Equal(got[i:], seq(100, 110)) {
					t.Fatalf("%s read %v, want it to end with 100-109", d, got)
				}
			}
		})
	}
}
