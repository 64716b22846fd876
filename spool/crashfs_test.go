package spool

import (
	"errors"
	"syscall"
	"testing"
)

// TestCrashFSCapacity checks the disk with a size: a write that passes it writes what fits and
// fails with ENOSPC, and each way of giving space back (Remove, Truncate, Create over a file,
// Rename over a file) lets writes through again, except a removed file still open.
func TestCrashFSCapacity(t *testing.T) {
	fs := NewCrashFS()
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	fs.SetCapacity(100)
	a, err := fs.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.WriteAt(make([]byte, 60), 0); n != 60 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	b, err := fs.Create("/d/b")
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.WriteAt(make([]byte, 50), 0)
	if n != 40 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the capacity: %d, %v; want 40, ENOSPC", n, err)
	}
	if got := fs.Used(); got != 100 {
		t.Fatalf("used %d, want 100", got)
	}
	// Overwriting in place needs no space.
	if n, err := b.WriteAt(make([]byte, 40), 0); n != 40 || err != nil {
		t.Fatalf("overwrite: %d, %v", n, err)
	}
	if _, err := b.WriteAt([]byte{1}, 40); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	// A disk that shrinks below what its files hold (the model's capacity operation) still
	// lets a file be written again in place; only growing fails.
	fs.SetCapacity(70)
	if n, err := b.WriteAt(make([]byte, 40), 0); n != 40 || err != nil {
		t.Fatalf("overwrite on a disk past its capacity: %d, %v", n, err)
	}
	if n, err := b.WriteAt(make([]byte, 2), 39); n != 1 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write growing a file on a disk past its capacity: %d, %v; want 1, ENOSPC", n, err)
	}
	fs.SetCapacity(100)

	// Truncate gives back.
	if err := b.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 70 {
		t.Fatalf("used after truncate %d, want 70", got)
	}

	// Remove gives back only once the last handle closes.
	if err := fs.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 70 {
		t.Fatalf("used with a removed file still open %d, want 70", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 10 {
		t.Fatalf("used after close %d, want 10", got)
	}

	// Rename over a file frees the replaced one; Create over a file truncates it.
	c, err := fs.Create("/d/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt(make([]byte, 30), 0); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := fs.Rename("/d/c", "/d/b"); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if got := fs.Used(); got != 30 {
		t.Fatalf("used after rename over b %d, want 30", got)
	}
	b2, err := fs.Create("/d/b")
	if err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 0 {
		t.Fatalf("used after create over b %d, want 0", got)
	}
	_ = b2.Close()

	// Unlimited again.
	fs.SetCapacity(0)
	if _, err := b2.WriteAt(make([]byte, 1000), 0); err != nil {
		t.Fatalf("write with no capacity: %v", err)
	}
}

// TestCrashFSCapacityAfterCrash: a crash drops unsynced data and open handles, so the space a
// removed-but-open file held comes back.
func TestCrashFSCapacityAfterCrash(t *testing.T) {
	fs := NewCrashFS()
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	fs.SetCapacity(100)
	a, _ := fs.Create("/d/a")
	if _, err := a.WriteAt(make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 100 {
		t.Fatalf("used %d, want 100 (open)", got)
	}
	fs.Crash()
	if got := fs.Used(); got != 0 {
		t.Fatalf("used after crash %d, want 0", got)
	}
}

// TestCrashFSFailedSyncLosesWrites: after a failed Sync, the bytes it should have written stay
// readable but never become durable, even by a later successful Sync, unless written again.
func TestCrashFSFailedSyncLosesWrites(t *testing.T) {
	fs := NewCrashFS()
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.Create("/d/f")
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	write := func(s string, off int64) {
		t.Helper()
		if _, err := f.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	write("aaaa", 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	write("bbbb", 4)
	write("cc", 0)
	fs.SetSyncErr(syscall.EIO)
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want EIO", err)
	}
	fs.SetSyncErr(nil)
	if got, _ := fs.ReadFile("/d/f"); string(got) != "ccaabbbb" {
		t.Fatalf("read %q after the failed sync, want the writes still there", got)
	}
	write("dd", 6) // written again: durable by the next sync
	write("ee", 8)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	if got, _ := fs.ReadFile("/d/f"); string(got) != "aaaa\x00\x00ddee" {
		t.Fatalf("after a crash %q, want the lost writes gone: %q", got, "aaaa\x00\x00ddee")
	}
}
