package spool

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// ErrCrashed is returned by every operation of a CrashFS after its crash point, and by handles
// opened before the last Crash.
var ErrCrashed = errors.New("spool: simulated crash")

// CrashFS is an in-memory FS that models what survives a power loss, for tests: file data
// written since the last Sync of that file is lost at Crash, and so is every creation, rename
// and removal in a directory since the last SyncDir of that directory. It is strict: a real
// disk may keep more, never less.
//
// CrashAfter arms a crash point: the k-th counted operation (writes, syncs, truncations,
// creations, renames, removals, directory syncs) completes and every later operation fails with
// ErrCrashed, as if the process had died right after it. Crash then rewinds the contents to
// what was synced and lets a new spool open over it. Ops counts operations, so a test can run a
// scenario once to count them and re-run it crashing after each one.
//
// Fault hooks simulate a failing disk: WriteErr and SyncErr, when set, are returned by WriteAt
// and Sync of segment and cursor files instead of doing anything. SyncHook, when set, runs at
// the start of every file Sync, outside the lock, so a test can hold a sync in progress.
// Safe for concurrent use.
type CrashFS struct {
	mu struct {
		sync.Mutex
		gen     int                            // bumped by Crash; older handles fail
		files   map[string]*memNode            // the namespace as the process sees it
		synced  map[string]map[string]*memNode // per directory, the namespace as of its last SyncDir
		dirs    map[string]bool
		ops     int
		crashAt int // 0: never
		dead    bool

		writeErr error
		syncErr  error
		syncs    int
	}
	// SyncHook runs at the start of every file Sync; set it before use.
	SyncHook func()
}

type memNode struct {
	data   []byte
	synced []byte
}

// NewCrashFS returns an empty CrashFS.
func NewCrashFS() *CrashFS {
	fs := &CrashFS{}
	fs.mu.files = make(map[string]*memNode)
	fs.mu.synced = make(map[string]map[string]*memNode)
	fs.mu.dirs = make(map[string]bool)
	return fs
}

var _ FS = (*CrashFS)(nil)

// CrashAfter arms the crash point after the k-th counted operation from now (k >= 1); 0 disarms.
func (fs *CrashFS) CrashAfter(k int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if k == 0 {
		fs.mu.crashAt = 0
		return
	}
	fs.mu.crashAt = fs.mu.ops + k
}

// Ops returns the number of counted operations so far.
func (fs *CrashFS) Ops() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.ops
}

// Syncs returns the number of file Syncs that reached the disk so far.
func (fs *CrashFS) Syncs() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.syncs
}

// SetWriteErr makes file writes fail with err (nil: writes work again).
func (fs *CrashFS) SetWriteErr(err error) {
	fs.mu.Lock()
	fs.mu.writeErr = err
	fs.mu.Unlock()
}

// SetSyncErr makes file syncs fail with err (nil: syncs work again).
func (fs *CrashFS) SetSyncErr(err error) {
	fs.mu.Lock()
	fs.mu.syncErr = err
	fs.mu.Unlock()
}

// Crash simulates a power loss and a reboot: every file reverts to its synced data, every
// directory to its synced entries, open handles die, and a pending crash point is disarmed.
func (fs *CrashFS) Crash() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.gen++
	fs.mu.dead = false
	fs.mu.crashAt = 0
	files := make(map[string]*memNode)
	for dir, ents := range fs.mu.synced {
		for name, n := range ents {
			files[filepath.Join(dir, name)] = n
		}
	}
	for _, n := range files {
		n.data = slices.Clone(n.synced)
	}
	fs.mu.files = files
}

// ReadFile returns a copy of a file's current contents, for tests.
func (fs *CrashFS) ReadFile(name string) ([]byte, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.mu.files[name]
	if n == nil {
		return nil, os.ErrNotExist
	}
	return slices.Clone(n.data), nil
}

// WriteFile replaces a file's contents, synced and with its entry durable, for tests that plant
// damaged files.
func (fs *CrashFS) WriteFile(name string, data []byte) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := &memNode{data: slices.Clone(data), synced: slices.Clone(data)}
	fs.mu.files[name] = n
	dir, base := filepath.Split(name)
	dir = filepath.Clean(dir)
	if fs.mu.synced[dir] == nil {
		fs.mu.synced[dir] = make(map[string]*memNode)
	}
	fs.mu.synced[dir][base] = n
}

// opLocked counts an operation and reports whether it may run.
func (fs *CrashFS) opLocked() error {
	if fs.mu.dead {
		return ErrCrashed
	}
	fs.mu.ops++
	if fs.mu.crashAt > 0 && fs.mu.ops >= fs.mu.crashAt {
		fs.mu.dead = true
	}
	return nil
}

func (fs *CrashFS) MkdirAll(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.mu.dead {
		return ErrCrashed
	}
	// Directories are durable at once: the spool creates its directory only on first start,
	// and losing it would lose nothing the spool promised.
	dir = filepath.Clean(dir)
	fs.mu.dirs[dir] = true
	if fs.mu.synced[dir] == nil {
		fs.mu.synced[dir] = make(map[string]*memNode)
	}
	return nil
}

func (fs *CrashFS) Create(name string) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.opLocked(); err != nil {
		return nil, err
	}
	if !fs.mu.dirs[filepath.Dir(name)] {
		return nil, &os.PathError{Op: "create", Path: name, Err: os.ErrNotExist}
	}
	n := &memNode{}
	if old := fs.mu.files[name]; old != nil {
		// Truncating an existing file keeps its inode: the truncation is data, lost unless
		// synced.
		n = old
		n.data = n.data[:0:0]
	}
	fs.mu.files[name] = n
	return &memFile{fs: fs, n: n, gen: fs.mu.gen, write: true}, nil
}

func (fs *CrashFS) Open(name string, write bool) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.mu.dead {
		return nil, ErrCrashed
	}
	n := fs.mu.files[name]
	if n == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return &memFile{fs: fs, n: n, gen: fs.mu.gen, write: write}, nil
}

func (fs *CrashFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.opLocked(); err != nil {
		return err
	}
	n := fs.mu.files[oldname]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	delete(fs.mu.files, oldname)
	fs.mu.files[newname] = n
	return nil
}

func (fs *CrashFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.opLocked(); err != nil {
		return err
	}
	if fs.mu.files[name] == nil {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(fs.mu.files, name)
	return nil
}

func (fs *CrashFS) ReadDir(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.mu.dead {
		return nil, ErrCrashed
	}
	dir = filepath.Clean(dir)
	if !fs.mu.dirs[dir] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for p := range fs.mu.files {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	slices.Sort(names)
	return names, nil
}

func (fs *CrashFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.opLocked(); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	ents := make(map[string]*memNode)
	for p, n := range fs.mu.files {
		if filepath.Dir(p) == dir {
			ents[filepath.Base(p)] = n
		}
	}
	fs.mu.synced[dir] = ents
	return nil
}

type memFile struct {
	fs    *CrashFS
	n     *memNode
	gen   int
	write bool
}

func (f *memFile) liveLocked() error {
	if f.fs.mu.dead || f.gen != f.fs.mu.gen {
		return ErrCrashed
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.liveLocked(); err != nil {
		return 0, err
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.liveLocked(); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, syscall.EBADF
	}
	if err := f.fs.opLocked(); err != nil {
		return 0, err
	}
	if f.fs.mu.writeErr != nil {
		return 0, f.fs.mu.writeErr
	}
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.n.data = slices.Grow(f.n.data, int(end)-len(f.n.data))[:end]
	}
	copy(f.n.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if h := f.fs.SyncHook; h != nil {
		h()
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.liveLocked(); err != nil {
		return err
	}
	if err := f.fs.opLocked(); err != nil {
		return err
	}
	if f.fs.mu.syncErr != nil {
		return f.fs.mu.syncErr
	}
	f.fs.mu.syncs++
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.liveLocked(); err != nil {
		return err
	}
	if err := f.fs.opLocked(); err != nil {
		return err
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, int(size)-len(f.n.data))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.liveLocked(); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error { return nil }
