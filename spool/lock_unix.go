//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock takes the spool directory for this process: an exclusive flock(2) on its lock file,
// which the kernel drops when the process ends however it ends (kill -9 included), so a
// crashed otlpgate never leaves a directory locked. A second process on the same directory
// would append to the same segments and checkpoint over the same cursors; it is refused
// instead, with the holder's process id as the lock file records it.
func (o OSFS) Lock(dir string) (unlock func() error, err error) {
	name := filepath.Join(dir, lockName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, o.fileMode())
	if err != nil {
		return nil, fmt.Errorf("cannot open spool lock file %s: %w", name, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		holder := ""
		if b, rerr := os.ReadFile(name); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = " (process " + strconv.Itoa(pid) + ")"
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by another otlpgate%s: give each process a -spool.dir of its own", ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("cannot lock spool dir %s: %w", dir, err)
	}
	// The process id is for the message above only; the lock is the flock, not the content.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil
}
