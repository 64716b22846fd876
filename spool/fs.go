package spool

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// FS is the file-system seam of the spool. The spool does all its I/O through it, so that tests
// can run the same code over CrashFS, which loses unsynced writes at a simulated crash. Names
// are full paths. Implementations must be safe for concurrent use.
type FS interface {
	// MkdirAll creates dir and its parents, as os.MkdirAll.
	MkdirAll(dir string) error
	// Create creates name, or truncates it, open for reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file; for writing too when write is true.
	Open(name string, write bool) (File, error)
	// Rename renames a file atomically, replacing new.
	Rename(oldname, newname string) error
	// Remove removes a file.
	Remove(name string) error
	// ReadDir lists the names (not paths) of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the entries of dir (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// File is an open file of an FS. The spool writes at explicit offsets and never relies on a
// file position, so one handle can be read and written by different goroutines.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the data written so far durable (fdatasync on Linux).
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	Close() error
}

// OSFS is the FS of the operating system. The spool holds what clients sent, so what it
// creates is its owner's only: files 0600 in directories 0700, or 0640 and 0750 with
// GroupReadable (-spool.group-readable), whatever the umask. A directory that exists already
// keeps its mode: it is the operator's.
type OSFS struct {
	// GroupReadable lets the group read the files and list the directory.
	GroupReadable bool
}

var _ FS = OSFS{}

func (o OSFS) fileMode() os.FileMode {
	if o.GroupReadable {
		return 0o640
	}
	return 0o600
}

func (o OSFS) dirMode() os.FileMode {
	if o.GroupReadable {
		return 0o750
	}
	return 0o700
}

func (o OSFS) MkdirAll(dir string) error { return mkdirMode(dir, o.dirMode()) }

// mkdirMode creates dir and its parents, and gives dir the mode exactly, the umask
// notwithstanding, when it creates it.
func mkdirMode(dir string, mode os.FileMode) error {
	if _, err := os.Stat(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, mode) // exists (or cannot be looked at): MkdirAll says which
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

func (o OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, o.fileMode())
	if err != nil {
		return nil, err
	}
	// The spool creates only files of its own (new segments, cursor drafts): their mode is
	// set whatever the umask took away or a stale file had.
	if err := f.Chmod(o.fileMode()); err != nil {
		f.Close()
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Open(name string, write bool) (File, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(name, flag, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (OSFS) Remove(name string) error { return os.Remove(name) }

func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct{ f *os.File }

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Sync() error                              { return datasync(o.f) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Close() error                             { return o.f.Close() }

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
