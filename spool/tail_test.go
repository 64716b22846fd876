package spool

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestTailReads: a reader that keeps up takes every record from the tail; one that fell behind
// reads the sealed segments from the file and the active one's recent records from memory.
func TestTailReads(t *testing.T) {
	s := mustOpen(t, testConfig(SyncNone), NewCrashFS(), "behind", "uptodate")
	defer s.Close()
	up := reader(t, s, "uptodate")
	var got []int
	mem := delta(readsMemory, func() {
		for i := range 20 {
			appendN(t, s, i, i+1)
			got = append(got, drain(t, up, true)...)
		}
	})
	if !slices.Equal(got, seq(0, 20)) || mem != 20 {
		t.Fatalf("up to date: read %v, %v from memory; want 0..19, 20", got, mem)
	}
	// Eight 116-byte frames fill a 1 KiB segment: 0..15 are in sealed segments, 16..19 in the
	// active one, whose records the tail holds.
	var ids []int
	disk := delta(readsDisk, func() {
		mem = delta(readsMemory, func() { ids = drain(t, reader(t, s, "behind"), true) })
	})
	if !slices.Equal(ids, seq(0, 20)) || disk != 16 || mem != 4 {
		t.Fatalf("behind: read %v, %v from disk, %v from memory; want 0..19, 16, 4", ids, disk, mem)
	}
}

// TestTailSmall: a tail that holds two frames restarts when the third does not fit; a record
// it no longer holds is read from the file, and without a tail everything is.
func TestTailSmall(t *testing.T) {
	for _, tc := range []struct {
		tail      int64
		disk, mem float64
	}{{250, 4, 2}, {0, 6, 0}, {100, 6, 0}} {
		cfg := testConfig(SyncNone)
		cfg.TailBytes = tc.tail
		s := mustOpen(t, cfg, NewCrashFS(), "a")
		appendN(t, s, 0, 6)
		var ids []int
		var mem float64
		disk := delta(readsDisk, func() {
			mem = delta(readsMemory, func() { ids = drain(t, reader(t, s, "a"), true) })
		})
		if !slices.Equal(ids, seq(0, 6)) || disk != tc.disk || mem != tc.mem {
			t.Fatalf("tail %d: read %v, %v from disk, %v from memory; want 0..5, %v, %v",
				tc.tail, ids, disk, mem, tc.disk, tc.mem)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// countFS counts the writes of records (not segment headers or cursors) to segment files.
type countFS struct {
	*CrashFS
	writes *atomic.Int64
}

type countFile struct {
	File
	writes *atomic.Int64
}

func (c countFS) Create(name string) (File, error) {
	f, err := c.CrashFS.Create(name)
	if err != nil {
		return nil, err
	}
	return countFile{f, c.writes}, nil
}

func (c countFile) WriteAt(p []byte, off int64) (int, error) {
	if off >= headerSize {
		c.writes.Add(1)
	}
	return c.File.WriteAt(p, off)
}

// TestAlwaysOneWritePerCommit: with SyncAlways, concurrent appends are written by their commit,
// one write for all of them, so there are never more record writes than syncs; what was
// acknowledged survives a crash and reads back complete.
func TestAlwaysOneWritePerCommit(t *testing.T) {
	cfg := testConfig(SyncAlways)
	cfg.SegmentBytes = 1 << 20
	cfg.MaxBytes = 4 << 20
	cfs := NewCrashFS()
	var writes atomic.Int64
	s := mustOpen(t, cfg, countFS{cfs, &writes}, "a")
	syncs0 := cfs.Syncs()
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := w*each + i
				if _, err := s.Append(Record{Signal: uint8(id % 3), Items: uint32(id), Payload: payload(id)}); err != nil {
					t.Errorf("Append(%d): %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	w, syncs := writes.Load(), int64(cfs.Syncs()-syncs0)
	if w == 0 || w > syncs {
		t.Fatalf("%d record writes for %d syncs; want at most one write per sync", w, syncs)
	}
	abandon(s)
	cfs.Crash()
	s = mustOpen(t, cfg, cfs, "a")
	defer s.Close()
	ids := drain(t, reader(t, s, "a"), true)
	slices.Sort(ids)
	if !slices.Equal(ids, seq(0, workers*each)) {
		t.Fatalf("after a crash read %d records %v, want 0..%d", len(ids), ids, workers*each-1)
	}
}

// TestAlwaysWriteFails: a commit whose write fails refuses the appends it carried and cuts
// them off; the next appends land where they began and nothing refused is ever read.
func TestAlwaysWriteFails(t *testing.T) {
	cfg := testConfig(SyncAlways)
	cfs := NewCrashFS()
	s := mustOpen(t, cfg, cfs, "a")
	appendN(t, s, 0, 2)
	cfs.SetWriteErr(syscall.ENOSPC)
	for i := 2; i < 4; i++ {
		if _, err := s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)}); !errors.Is(err, ErrIO) {
			t.Fatalf("Append(%d) with a failing disk: %v, want ErrIO", i, err)
		}
	}
	cfs.SetWriteErr(nil)
	appendN(t, s, 4, 6)
	// Unfinished, so that the checkpoint the failed appends asked for keeps them for the replay.
	if ids := drain(t, reader(t, s, "a"), false); !slices.Equal(ids, []int{0, 1, 4, 5}) {
		t.Fatalf("read %v, want [0 1 4 5]", ids)
	}
	abandon(s)
	cfs.Crash()
	s = mustOpen(t, cfg, cfs, "a")
	defer s.Close()
	if ids := drain(t, reader(t, s, "a"), true); !slices.Equal(ids, []int{0, 1, 4, 5}) {
		t.Fatalf("after a crash read %v, want [0 1 4 5]", ids)
	}
}
