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
// SetCapacity gives the disk a size in bytes: the data of every file that still takes space (in
// the namespace, or removed but still open, as on a real disk) counts against it, a write that
// would pass it writes what fits and fails with syscall.ENOSPC (matchable with errors.Is, like a
// real short write), and Remove, Truncate and Create over an existing file give space back.
// Creations, renames and directory entries take no space. SetCopyOnWrite makes writing a file's
// own bytes again need room as well.
//
// Fault hooks simulate a failing disk: WriteErr and SyncErr, when set, are returned by WriteAt
// and Sync of segment and cursor files instead of doing anything. A Sync failed by SyncErr
// loses the file's unsynced writes as Linux does after a writeback error: they stay readable,
// but no later Sync makes them durable; only writing those bytes again does. SyncHook, when set, runs at
// the start of every file Sync, outside the lock, so a test can hold a sync in progress.
// Safe for concurrent use.
type CrashFS struct {
	mu struct {
		sync.Mutex
		gen     int                            // bumped by Crash; older handles fail
		files   map[string]*memNode            // the namespace as the process sees it
		synced  map[string]map[string]*memNode // per directory, the namespace as of its last SyncDir
		dirs    map[string]bool
		orphans map[*memNode]bool // removed from the namespace, still open
		ops     int
		crashAt int // 0: never
		dead    bool

		writeErr error
		syncErr  error
		syncs    int
		capacity int64 // 0: unlimited
		cow      bool  // SetCopyOnWrite
	}
	// SyncHook runs at the start of every file Sync; set it before use.
	SyncHook func()
}

type memNode struct {
	data   []byte
	synced []byte
	opens  int // live handles; a removed node holds its space until the last one closes
	// lost marks the bytes whose writes a failed Sync dropped: a later Sync keeps the synced
	// contents there (zeros past the old end) until they are written again.
	lost []bool
}

// loseUnsynced marks every byte that differs from the synced contents as lost.
func (n *memNode) loseUnsynced() {
	if len(n.lost) < len(n.data) {
		n.lost = append(n.lost, make([]bool, len(n.data)-len(n.lost))...)
	}
	for i := range n.data {
		if i >= len(n.synced) || n.data[i] != n.synced[i] {
			n.lost[i] = true
		}
	}
}

// durable returns what a successful Sync leaves on the disk.
func (n *memNode) durable() []byte {
	d := slices.Clone(n.data)
	for i, l := range n.lost[:min(len(n.lost), len(d))] {
		if !l {
			continue
		}
		if i < len(n.synced) {
			d[i] = n.synced[i]
		} else {
			d[i] = 0
		}
	}
	return d
}

// NewCrashFS returns an empty CrashFS.
func NewCrashFS() *CrashFS {
	fs := &CrashFS{}
	fs.mu.files = make(map[string]*memNode)
	fs.mu.synced = make(map[string]map[string]*memNode)
	fs.mu.dirs = make(map[string]bool)
	fs.mu.orphans = make(map[*memNode]bool)
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

// SetCapacity sets the size of the disk in bytes; 0 makes it unlimited. Lowering it below what
// is used already makes every write that grows a file fail until enough is freed.
func (fs *CrashFS) SetCapacity(bytes int64) {
	fs.mu.Lock()
	fs.mu.capacity = bytes
	fs.mu.Unlock()
}

// SetCopyOnWrite makes the disk write nothing in place, as btrfs, ZFS or a thin volume: a write
// needs free room for every byte it writes, so on a full disk, or one holding more than its
// capacity, writing a file's own bytes again fails with ENOSPC too.
func (fs *CrashFS) SetCopyOnWrite(on bool) {
	fs.mu.Lock()
	fs.mu.cow = on
	fs.mu.Unlock()
}

// Used returns the bytes that take space on the disk: the data of every file in the namespace,
// plus that of removed files still open.
func (fs *CrashFS) Used() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.usedLocked()
}

func (fs *CrashFS) usedLocked() int64 {
	var used int64
	for _, n := range fs.mu.files {
		used += int64(len(n.data))
	}
	for n := range fs.mu.orphans {
		used += int64(len(n.data))
	}
	return used
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
		n.lost = nil
	}
	for _, n := range fs.mu.files {
		n.opens = 0
	}
	for n := range fs.mu.orphans {
		n.opens = 0
	}
	clear(fs.mu.orphans)
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
		n.lost = nil
	}
	fs.mu.files[name] = n
	n.opens++
	return &memFile{fs: fs, n: n, name: name, gen: fs.mu.gen, write: true}, nil
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
	n.opens++
	return &memFile{fs: fs, n: n, name: name, gen: fs.mu.gen, write: write}, nil
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
	old := fs.mu.files[newname]
	delete(fs.mu.files, oldname)
	fs.mu.files[newname] = n
	if old != nil && old != n {
		fs.orphanLocked(old)
	}
	return nil
}

func (fs *CrashFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.opLocked(); err != nil {
		return err
	}
	n := fs.mu.files[name]
	if n == nil {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(fs.mu.files, name)
	fs.orphanLocked(n)
	return nil
}

// orphanLocked notes that n has left the namespace: its space stays taken while a handle is open.
func (fs *CrashFS) orphanLocked(n *memNode) {
	for _, m := range fs.mu.files {
		if m == n {
			return
		}
	}
	if n.opens > 0 {
		fs.mu.orphans[n] = true
	}
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
	fs     *CrashFS
	n      *memNode
	name   string
	gen    int
	write  bool
	closed bool
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
	var full error
	if c := f.fs.mu.capacity; c > 0 {
		// A real disk writes what fits and then reports ENOSPC, leaving a short write behind.
		// Writing again what a file already holds takes no new space, even on a disk that
		// holds more than its capacity (one shrunk under its files).
		free := c - f.fs.usedLocked()
		if grow := off + int64(len(p)) - int64(len(f.n.data)); grow > 0 && grow > free {
			fit := max(int64(len(f.n.data))+max(free, 0)-off, 0)
			p = p[:min(fit, int64(len(p)))]
			full = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
		} else if f.fs.mu.cow && int64(len(p)) > free {
			p = p[:max(free, 0)]
			full = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
		}
	}
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.n.data = slices.Grow(f.n.data, int(end)-len(f.n.data))[:end]
	}
	copy(f.n.data[off:], p)
	if l := f.n.lost; int64(len(l)) > off {
		clear(l[off:min(end, int64(len(l)))])
	}
	return len(p), full
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
		f.n.loseUnsynced()
		return f.fs.mu.syncErr
	}
	f.fs.mu.syncs++
	f.n.synced = f.n.durable()
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
		f.n.lost = f.n.lost[:min(int64(len(f.n.lost)), size)]
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

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	if f.gen != f.fs.mu.gen {
		return nil // the crash closed it
	}
	f.n.opens--
	if f.n.opens == 0 {
		delete(f.fs.mu.orphans, f.n)
	}
	return nil
}
