package spool

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestInheritedSyncWaitsForRoom: a process killed in interval mode leaves its last records
// unsynced in the page cache, and the next start makes them durable by writing the segment
// again and syncing it. On a file system that writes nothing in place that write needs room,
// which a full disk does not have: the start comes up all the same, counts the segment in
// otlpgate_spool_unsynced_inherited_segments, and tries again at every sync interval. Once the
// disk has room the records are durable, and a power loss after that takes none of them;
// without the later try (the control), the power loss takes them.
func TestInheritedSyncWaitsForRoom(t *testing.T) {
	for _, retry := range []bool{true, false} {
		name := "retried"
		if !retry {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			fs, cfg, base := killedOnAFullDisk(t)
			s := mustOpen(t, cfg, fs, "a")
			if got := testutil.ToFloat64(unsyncedInherited) - base; got != 1 {
				t.Fatalf("unsynced inherited segments after a start on a full disk: %v, want 1", got)
			}
			s.syncInheritedPending() // still full
			if got := testutil.ToFloat64(unsyncedInherited) - base; got != 1 {
				t.Fatalf("after a try on a full disk: %v, want 1", got)
			}
			if f, err := fs.Create(testDir + "/probe"); err == nil {
				if _, err := f.WriteAt([]byte{1}, 0); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("the disk is not full: %v", err)
				}
				_ = f.Close()
				_ = fs.Remove(testDir + "/probe")
			}
			fs.SetCapacity(0)
			if retry {
				s.syncInheritedPending()
				if got := testutil.ToFloat64(unsyncedInherited) - base; got != 0 {
					t.Fatalf("after a try with room: %v, want 0", got)
				}
			}
			abandon(s)
			fs.Crash() // a power loss: only what was synced is left

			s = mustOpen(t, cfg, fs, "a")
			defer s.Close()
			got := drain(t, reader(t, s, "a"), true)
			want := make([]int, 20)
			for i := range want {
				want[i] = i
			}
			if !retry {
				want = want[:16] // the last segment's records were never made durable
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read after the power loss: %v, want %v", got, want)
			}
		})
	}
}

// TestInheritedSyncForgottenOnceDeleted: a segment waiting for room that every destination
// finished, and a checkpoint deleted, is no longer tried or counted.
func TestInheritedSyncForgottenOnceDeleted(t *testing.T) {
	fs, cfg, base := killedOnAFullDisk(t)
	s := mustOpen(t, cfg, fs, "a")
	defer s.Close()
	if got := testutil.ToFloat64(unsyncedInherited) - base; got != 1 {
		t.Fatalf("unsynced inherited segments: %v, want 1", got)
	}
	if got := drain(t, reader(t, s, "a"), true); len(got) != 20 {
		t.Fatalf("read %v, want 20 records", got)
	}
	if err := s.Checkpoint(); err != nil && !diskFull(err) {
		t.Fatal(err)
	}
	if slices.ContainsFunc(segFiles(t, fs), func(n string) bool { return n == segmentName(3) }) {
		t.Fatalf("segment 3 still there after every record was finished: %v", segFiles(t, fs))
	}
	s.syncInheritedPending()
	if got := testutil.ToFloat64(unsyncedInherited) - base; got != 0 {
		t.Fatalf("unsynced inherited segments after the segment was deleted: %v, want 0", got)
	}
}

// killedOnAFullDisk is a spool in interval mode killed with records 0..19 appended, 8 a
// segment, so that the last segment (16..19) is unsynced, left on a copy-on-write disk with no
// room; it returns the unsynced inherited segments gauge as it was then.
func killedOnAFullDisk(t *testing.T) (*CrashFS, Config, float64) {
	t.Helper()
	fs := NewCrashFS()
	cfg := testConfig(SyncInterval)
	s := mustOpen(t, cfg, fs, "a")
	appendN(t, s, 0, 20)
	abandon(s)
	fs.killProcess()
	fs.SetCopyOnWrite(true)
	fs.SetCapacity(fs.Used())
	return fs, cfg, testutil.ToFloat64(unsyncedInherited)
}
