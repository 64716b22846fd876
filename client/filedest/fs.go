package filedest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileSystem is what the destination asks of the file system. The writer goroutine is its only
// user; tests put failures (a full disk, a failed rename) between the destination and the disk
// through it.
type fileSystem interface {
	MkdirAll(path string, perm os.FileMode) error
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
}

// file is the open file: *os.File outside tests.
type file interface {
	Write(p []byte) (int, error)
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

// osFS is the operating system's file system.
type osFS struct{}

// MkdirAll creates path and its parents; path gets perm exactly, the umask notwithstanding,
// when it is created here. An existing directory keeps its mode: it is the operator's.
func (osFS) MkdirAll(path string, perm os.FileMode) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(path, perm)
	}
	if err := os.MkdirAll(path, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// OpenFile opens name; a file it creates gets perm exactly, the umask notwithstanding. An
// existing file keeps its mode.
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if flag&os.O_CREATE != 0 && flag&os.O_EXCL == 0 {
		f, err := os.OpenFile(name, flag|os.O_EXCL, perm)
		switch {
		case err == nil:
			if err := f.Chmod(perm); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		case !errors.Is(err, os.ErrExist):
			return nil, err
		}
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) Remove(name string) error { return os.Remove(name) }

// CheckPath reports, without creating anything, whether a file destination could open path: its
// nearest existing ancestor must be a directory this process can create entries in (the missing
// directories are created at the start), and an existing file must be writable. For otlpgate
// -check, which creates nothing on disk.
func CheckPath(path string) error {
	if path == "" {
		return errors.New("filedest: path is required")
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("filedest: %s is a directory, not a file", path)
		}
		if err := unix.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("filedest: cannot write %s: %w", path, err)
		}
		return nil
	}
	dir := filepath.Dir(path)
	for {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("filedest: cannot create the directory of %s: %s is not a directory", path, dir)
			}
			if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("filedest: cannot create the directory of %s: %s: %w", path, dir, err)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("filedest: cannot create the directory of %s: %w", path, err)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return fmt.Errorf("filedest: cannot create the directory of %s", path)
		}
		dir = up
	}
}
