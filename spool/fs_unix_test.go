//go:build unix

package spool

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs f under umask m. The umask is the process's: no test here runs in parallel.
func withUmask(m int, f func()) {
	old := syscall.Umask(m)
	defer syscall.Umask(old)
	f()
}

// TestOSFSModes opens a real spool in a directory it creates, appends and checkpoints, and
// checks the modes of the directory, the segment and the cursor: the owner's only by default,
// the group's to read with GroupReadable, whatever the umask (0 lets everything through,
// 077 would take the group's bits).
func TestOSFSModes(t *testing.T) {
	for _, tc := range []struct {
		fs              OSFS
		umask           int
		fileMode, dMode os.FileMode
	}{
		{OSFS{}, 0o022, 0o600, 0o700},
		{OSFS{}, 0, 0o600, 0o700},
		{OSFS{GroupReadable: true}, 0o022, 0o640, 0o750},
		{OSFS{GroupReadable: true}, 0o077, 0o640, 0o750},
	} {
		dir := filepath.Join(t.TempDir(), "spool")
		withUmask(tc.umask, func() {
			cfg := testConfig(SyncAlways)
			cfg.Dir = dir
			s := mustOpen(t, cfg, tc.fs, "a")
			appendN(t, s, 0, 1)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
		check := func(path string, want os.FileMode) {
			t.Helper()
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != want {
				t.Errorf("group-readable=%v umask %03o: %s has mode %04o, want %04o",
					tc.fs.GroupReadable, tc.umask, filepath.Base(path), got, want)
			}
		}
		check(dir, tc.dMode)
		check(filepath.Join(dir, segmentName(1)), tc.fileMode)
		check(filepath.Join(dir, cursorName("a")), tc.fileMode)
	}
}

// TestOSFSKeepsAnExistingDirectory: a directory the operator made keeps its mode.
func TestOSFSKeepsAnExistingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (OSFS{}).MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o755 {
		t.Fatalf("existing directory changed to %04o", st.Mode().Perm())
	}
}

// One process at a time has a spool directory: a second Open of it is refused with ErrLocked
// while the first is open, and succeeds once it is closed.
func TestOSFSOneSpoolPerDir(t *testing.T) {
	cfg := testConfig(SyncAlways)
	cfg.Dir = filepath.Join(t.TempDir(), "spool")
	s := mustOpen(t, cfg, OSFS{}, "a")
	if _, err := Open(cfg, OSFS{}, []string{"a"}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second open of a spool in use: %v, want ErrLocked naming process %d", err, os.Getpid())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, cfg, OSFS{}, "a")
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}
