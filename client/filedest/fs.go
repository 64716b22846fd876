package filedest

import "os"

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

func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) Remove(name string) error { return os.Remove(name) }
