package spool

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"
)

// diskBytes is a disk that holds the cursors of two destinations, two full test segments
// (16-byte header and eight 116-byte records each), a third segment with three records, and 10
// bytes: too few for another cursor.
const diskBytes = 2*cursorSize + 2*(16+8*116) + 16 + 3*116 + 10

// fillDisk appends records from id on until the disk refuses one, and returns that one's id.
func fillDisk(t *testing.T, s *Spool, id int) int {
	t.Helper()
	for range 1000 {
		_, err := s.Append(Record{Signal: uint8(id % 3), Items: uint32(id), Payload: payload(id)})
		if err == nil {
			id++
			continue
		}
		if !errors.Is(err, ErrIO) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append(%d) on a filling disk: %v, want ErrIO wrapping ENOSPC", id, err)
		}
		return id
	}
	t.Fatal("the disk never filled")
	return 0
}

// appendEventually retries record id, as a client told to come back would, until the spool
// takes it. Nothing but the spool itself frees space: the test never checkpoints.
func appendEventually(t *testing.T, s *Spool, id int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Append(Record{Signal: uint8(id % 3), Items: uint32(id), Payload: payload(id)})
		if err == nil {
			return
		}
		if !errors.Is(err, ErrIO) {
			t.Fatalf("Append(%d): %v", id, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Append(%d) still failing after the destinations drained: %v", id, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDiskFullThenRecovers fills a disk of a real capacity with the spool (far below
// -spool.max-bytes), lets the destinations drain it, and expects appends to work again without
// anyone running a checkpoint by hand: finished segments must be freed although no cursor can
// be written. Then it fills the disk again, kills the process with nothing finished, and
// restarts on the full disk, with a destination added: the start must come up, replay, drain,
// and take appends again. Every acknowledged record reaches both old destinations; the new one
// reads what came after it.
func TestDiskFullThenRecovers(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := NewCrashFS()
			fs.SetCapacity(diskBytes)
			cfg := testConfig(mode)
			s := mustOpen(t, cfg, fs, "a", "b")
			read := map[string][]int{}
			drainAll := func(dests ...string) {
				for _, d := range dests {
					read[d] = append(read[d], drain(t, reader(t, s, d), true)...)
				}
			}

			full := fillDisk(t, s, 0)
			if full != 19 {
				t.Fatalf("the disk took records 0-%d, want 0-18", full-1)
			}
			if free := diskBytes - fs.Used(); free >= cursorSize {
				t.Fatalf("%d bytes free on the full disk: room for a cursor", free)
			}
			drainAll("a", "b")
			appendEventually(t, s, full)

			// Full again, nothing finished, then kill -9 and a start on the full disk.
			full = fillDisk(t, s, full+1)
			abandon(s)
			var err error
			s, err = Open(cfg, fs, []string{"a", "b", "c"})
			if err != nil {
				t.Fatalf("Open on a full disk: %v", err)
			}
			defer s.Close()
			drainAll("a", "b")
			appendEventually(t, s, full)
			drainAll("a", "b", "c")

			for _, d := range []string{"a", "b"} {
				got := slices.Compact(slices.Sorted(slices.Values(read[d])))
				if !slices.Equal(got, seq(0, full+1)) {
					t.Fatalf("%s read %v, want every acknowledged record 0-%d", d, got, full)
				}
			}
			if !slices.Equal(read["c"], []int{full}) {
				t.Fatalf("c read %v, want [%d]", read["c"], full)
			}
			// Everything is finished: what stays is three cursors and the segment of the last
			// record. A segment deleted while a reader kept it open would still take space.
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if used, want := fs.Used(), int64(3*cursorSize+headerSize+frameSize+100); used != want {
				t.Fatalf("%d bytes used with everything finished, want %d", used, want)
			}
		})
	}
}
