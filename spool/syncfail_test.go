package spool

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAlwaysFailedSyncIsNeverTrusted: with -spool.sync=always and no tail (each append writes
// at once), a record is written while the sync of the one before it runs; that sync fails,
// which on Linux may drop both records' pages for good. A later sync of the same segment would
// succeed without them, so neither may be acknowledged by one: both appends fail, the next
// record goes to a new segment, and every acknowledged record survives a power loss.
func TestAlwaysFailedSyncIsNeverTrusted(t *testing.T) {
	fs := NewCrashFS()
	cfg := testConfig(SyncAlways)
	cfg.TailBytes = 0
	s := mustOpen(t, cfg, fs, "a")
	var acked []int
	appendOK := func(id int) error {
		_, err := s.Append(Record{Signal: uint8(id % 3), Items: uint32(id), Payload: payload(id)})
		if err == nil {
			acked = append(acked, id)
		}
		return err
	}
	for i := range 2 {
		if err := appendOK(i); err != nil {
			t.Fatal(err)
		}
	}
	segName := testDir + "/" + segFiles(t, fs)[0]

	inSync, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SyncHook = func() {
		once.Do(func() {
			close(inSync)
			<-release
		})
	}
	errs := make(chan error, 2)
	appendTo := func(id int) {
		_, err := s.Append(Record{Signal: uint8(id % 3), Items: uint32(id), Payload: payload(id)})
		errs <- err
	}
	go appendTo(2)
	<-inSync // the sync of record 2 runs
	go appendTo(3)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := fs.ReadFile(segName); len(b) == headerSize+4*(frameSize+100) {
			break // record 3 is written and waits for its sync
		}
		if time.Now().After(deadline) {
			t.Fatal("record 3 was never written")
		}
	}
	fs.SetSyncErr(syscall.EIO)
	close(release)
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrIO) || !errors.Is(err, syscall.EIO) {
			t.Errorf("an append whose records a failed sync held: %v, want ErrIO wrapping EIO", err)
		}
	}
	fs.SetSyncErr(nil)
	fs.SyncHook = nil
	for i := 4; i < 6; i++ {
		if err := appendOK(i); err != nil {
			t.Fatalf("Append(%d) after the failed sync: %v", i, err)
		}
	}
	if got := len(segFiles(t, fs)); got != 2 {
		t.Fatalf("%d segments, want the failed one sealed and a new one", got)
	}
	if got := drain(t, reader(t, s, "a"), false); !slices.Equal(got, acked) {
		t.Fatalf("read %v, want the acknowledged %v", got, acked)
	}
	abandon(s)
	fs.Crash()
	s = mustOpen(t, cfg, fs, "a")
	defer s.Close()
	if got := drain(t, reader(t, s, "a"), true); !slices.Equal(got, acked) {
		t.Fatalf("after a power loss read %v, want the acknowledged %v", got, acked)
	}
}

// TestIntervalFailedSyncFailsTheSpool: with -spool.sync=interval, records are acknowledged
// after write(2); a failed sync may have lost them, and no later sync can bring them back. The
// spool fails loudly (Failed, Err, every later append refused) instead of syncing the segment
// again and trusting it, whether the interval sync or a rotation's sync failed. What is still
// readable is delivered.
func TestIntervalFailedSyncFailsTheSpool(t *testing.T) {
	for _, at := range []string{"interval sync", "rotation"} {
		t.Run(at, func(t *testing.T) {
			fs := NewCrashFS()
			cfg := testConfig(SyncInterval)
			s := mustOpen(t, cfg, fs, "a")
			defer s.Close()
			appendN(t, s, 0, 2)
			if err := s.sync(); err != nil {
				t.Fatal(err)
			}
			appendN(t, s, 2, 4)
			fs.SetSyncErr(syscall.EIO)
			var err error
			n := delta(fsyncErrors, func() {
				if at == "interval sync" {
					err = s.sync()
				} else {
					// Records 4-7 fill the segment; 8 rotates, which syncs it.
					for i := 4; i < 9 && err == nil; i++ {
						_, err = s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)})
					}
				}
			})
			if !errors.Is(err, syscall.EIO) || n != 1 {
				t.Fatalf("the failing sync: %v (%v counted), want EIO", err, n)
			}
			fs.SetSyncErr(nil)
			select {
			case <-s.Failed():
			default:
				t.Fatal("Failed not closed after a failed sync of acknowledged records")
			}
			if err := s.Err(); !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Err = %v, want ErrSyncFailed wrapping EIO", err)
			}
			syncs := fs.Syncs()
			if _, err := s.Append(Record{Items: 99, Payload: payload(99)}); !errors.Is(err, ErrIO) || !errors.Is(err, ErrSyncFailed) {
				t.Fatalf("Append after the failure: %v, want ErrIO wrapping ErrSyncFailed", err)
			}
			if err := s.sync(); err != nil || fs.Syncs() != syncs {
				t.Fatalf("the failed segment was synced again (%v)", err)
			}
			want := seq(0, 4)
			if at == "rotation" {
				want = seq(0, 8)
			}
			if got := drain(t, reader(t, s, "a"), true); !slices.Equal(got, want) {
				t.Fatalf("read %v, want %v still delivered", got, want)
			}
		})
	}
}
