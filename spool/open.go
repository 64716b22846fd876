package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/otlpgate/otlpgate/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	recoveredSegments = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_spool_recovery_segments_total",
		Help: "Segments repaired at start-up, by outcome (empty: zero-length or headerless last segment removed; torn_tail: truncated at the last whole record; unreadable: bad header, renamed aside with suffix .unreadable; future: written by a newer version, renamed aside).",
	}, []string{"outcome"})
	recEmpty       = recoveredSegments.WithLabelValues("empty")
	recTornTail    = recoveredSegments.WithLabelValues("torn_tail")
	recUnreadable  = recoveredSegments.WithLabelValues("unreadable")
	recFuture      = recoveredSegments.WithLabelValues("future")
	truncatedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_truncated_bytes_total",
		Help: "Bytes of torn records cut from the tail of the last segment at start-up (writes a crash interrupted; never acknowledged in -spool.sync=always).",
	})
	unsyncedInherited = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_spool_unsynced_inherited_segments",
		Help: "Segments an earlier process left unsynced (it was killed) that a full disk kept this start from making durable: until they are, a power loss may take records that process acknowledged. Tried again at every sync interval and checkpoint.",
	})
)

// inheritedSync is a segment an earlier process left unsynced that syncInherited could not make
// durable for want of room: its first rewrite bytes are to be written again before the sync.
type inheritedSync struct {
	seq     uint64
	rewrite int64
}

// Open opens or creates the spool in cfg.Dir over fs (OSFS{} in production) for the given
// destinations, recovering from whatever a crash left: a torn tail is truncated, bad records in
// the middle are left for readers to skip and count, unreadable segments are renamed aside.
// It reads only the last segment's records and the other segments' headers, so start-up time
// does not grow with the backlog. A destination with a cursor resumes at its durable position;
// a new one starts at the tail; cursors of destinations not listed are removed, releasing their
// hold on the spool. Open starts the spool's goroutines; Close stops them.
func Open(cfg Config, fs FS, destinations []string) (*Spool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Spool{
		cfg:     cfg,
		fs:      fs,
		wbuf:    pool.GetBytes(pool.MinSize),
		commitc: make(chan struct{}, 1),
		housec:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		failedc: make(chan struct{}),
	}
	s.syncDone = sync.NewCond(&s.mu.Mutex)
	s.mu.tail.buf = make([]byte, 0, cfg.TailBytes)
	s.mu.ages = make([]ageMark, 0, 64)
	s.initAgeLocked() // nothing else holds s yet
	if err := fs.MkdirAll(cfg.Dir); err != nil {
		return nil, fmt.Errorf("cannot create spool dir %s: %w", cfg.Dir, err)
	}
	if l, ok := fs.(Locker); ok {
		unlock, err := l.Lock(cfg.Dir)
		if err != nil {
			return nil, err
		}
		s.unlock = unlock
	}
	if err := s.recover(destinations); err != nil {
		s.forgetInherited()
		s.release()
		return nil, err
	}
	if cfg.Sync == SyncAlways {
		s.wg.Add(1)
		go s.committer()
	}
	s.wg.Add(1)
	go s.housekeeper()
	ageSpool.Store(s)
	return s, nil
}

func (s *Spool) recover(destinations []string) error {
	names, err := s.fs.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("cannot list spool dir %s: %w", s.cfg.Dir, err)
	}
	var segs []uint64
	cursors := make(map[string]string) // destination -> file name
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) {
			// A checkpoint died before its rename: the old cursor still stands.
			_ = s.fs.Remove(s.path(name))
			continue
		}
		if seq, aside, ok := parseSegmentName(name); ok {
			s.mu.nextSeq = max(s.mu.nextSeq, seq+1)
			if !aside {
				segs = append(segs, seq)
			}
			continue
		}
		if dest, ok := parseCursorName(name); ok {
			cursors[dest] = name
		}
	}
	// The first new record must land at or above every position a cursor holds, whatever the
	// directory still shows: a clean stop with everything delivered, then an idle start that
	// deletes the last (finished) segment, leaves cursors pointing past every segment file, and
	// numbering from the files alone would put new records below the cursors, where readers
	// never look and the next checkpoint deletes them as finished. A new segment seq starts at
	// makePos(seq, headerSize), so a cursor at a segment's start allows that segment, any other
	// the one after it. Cursors of destinations no longer listed count too: their removal may
	// not be durable yet.
	positions := make(map[string]Pos, len(cursors))
	untils := make(map[string]Pos)
	badCursor := make(map[string]bool)
	for dest, name := range cursors {
		p, until, err := s.readCursor(name)
		if err != nil {
			badCursor[dest] = true
			continue
		}
		positions[dest], untils[dest] = p, until
		need := p.Segment()
		if p.Offset() > headerSize {
			need++
		}
		s.mu.nextSeq = max(s.mu.nextSeq, need)
	}
	if s.mu.nextSeq == 0 {
		s.mu.nextSeq = 1 // segment 0 never exists, so Pos 0 is before everything
	}
	slices.Sort(segs)
	for i, seq := range segs {
		last := i == len(segs)-1
		g, err := s.recoverSegment(seq, last)
		if err != nil {
			return err
		}
		if g != nil {
			s.mu.segs = append(s.mu.segs, g)
			s.mu.bytes += g.size
		}
	}
	curBytes.Store(s.mu.bytes)
	curSegments.Store(int64(len(s.mu.segs)))
	curMaxBytes.Store(s.cfg.MaxBytes)

	// Appends go to a new segment, created on the first one: the tail is its first record.
	s.tailOpen = makePos(s.mu.nextSeq, headerSize)
	s.mu.written, s.mu.synced = s.tailOpen, s.tailOpen
	s.readable.Store(uint64(s.tailOpen))

	want := make(map[string]bool, len(destinations))
	for _, dest := range destinations {
		if want[dest] {
			return fmt.Errorf("spool: destination %q listed twice", dest)
		}
		want[dest] = true
		at := s.tailOpen
		fresh := true
		if badCursor[dest] {
			// Unknown position: replay everything rather than lose anything.
			badCursors.Inc()
			at = 0
		} else if p, ok := positions[dest]; ok {
			at, fresh = p, false
		}
		r := newReader(s, dest, at)
		// A cursor written while the destination was away says where it went; it is back,
		// and the next checkpoint writes its cursor without that.
		r.persistedUntil = untils[dest]
		if fresh {
			r.persisted = ^Pos(0)
		}
		if _, ok := cursors[dest]; !ok {
			// Without a cursor on disk, a crash would make it new again and start it at the
			// tail, past records acknowledged meanwhile: appends wait for its first cursor.
			r.unanchored = true
			s.unanchored.Add(1)
		}
		s.mu.readers = append(s.mu.readers, r)
	}
	for dest, name := range cursors {
		if want[dest] {
			continue
		}
		// What it still owed is counted before the checkpoint below deletes it: its
		// segments are still here, whoever else holds them.
		rel := Released{Destination: dest, Records: -1}
		if !badCursor[dest] {
			rel.Records = s.countOwed(positions[dest], untils[dest], nil)
			droppedRecords.WithLabelValues(dest, dropReasonNames[dropReleased]).Add(float64(rel.Records))
		}
		s.releasedAtOpen = append(s.releasedAtOpen, rel)
		_ = s.fs.Remove(s.path(name))
		releasedCursors.Inc()
		switch {
		case rel.Records > 0:
			s.cfg.logger().Error("data lost: a destination no longer listed still owed spooled records; they are dropped",
				"destination", dest, "records", rel.Records)
		case rel.Records < 0:
			s.cfg.logger().Error("data may be lost: a destination no longer listed had an unreadable cursor; what it owed is unknown and dropped",
				"destination", dest)
		}
	}
	slices.SortFunc(s.releasedAtOpen, func(a, b Released) int { return strings.Compare(a.Destination, b.Destination) })
	// The directory is synced whether or not this start changed it, in every sync mode: a
	// process killed between its own changes (a released cursor removed, a segment deleted)
	// and their sync left them in the page cache, where this start sees them and decides from
	// them, and a power loss would undo them. A released destination's cursor would come
	// back, and a later start that lists it again as new would resume it from there, below
	// the tail. Segments deleted as finished would come back under the numbers this start
	// reuses for its own, and the cursors it persists, synced in none mode too, would point
	// into the old records again: a destination would read again what it had finished before
	// its last checkpoint (TestSpoolModelRegressions/NoneStartAfterFailedCheckpoint).
	if err := s.fs.SyncDir(s.cfg.Dir); err != nil {
		return fmt.Errorf("cannot sync spool dir %s: %w", s.cfg.Dir, err)
	}
	// Delete what the known positions already passed, and persist the new cursors now. A full
	// disk does not stop the start: the deletions need no space, the destinations drain the
	// backlog, and the housekeeper writes the cursors once there is room (appends wait for
	// them, see Checkpoint). Any other failure is a directory the spool cannot use.
	if err := s.Checkpoint(); err != nil && !diskFull(err) {
		return fmt.Errorf("cannot write spool cursors in %s: %w", s.cfg.Dir, err)
	}
	return nil
}

// diskFull reports whether err says the file system (or the user's quota) has no room.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// recoverSegment checks one segment at start-up. It returns nil for a segment that was removed
// or set aside.
func (s *Spool) recoverSegment(seq uint64, last bool) (*segment, error) {
	name := s.path(segmentName(seq))
	f, err := s.fs.Open(name, last)
	if err != nil {
		return nil, s.setAside(name, recUnreadable)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, s.setAside(name, recUnreadable)
	}
	var h [headerSize]byte
	n, _ := f.ReadAt(h[:], 0)
	herr := checkSegmentHeader(h[:n], seq)
	switch {
	case size == 0 || (herr == errHeaderShort && last):
		// A crash between creating the segment and syncing its header: nothing in it was
		// ever acknowledged.
		recEmpty.Inc()
		if err := s.fs.Remove(name); err != nil {
			return nil, fmt.Errorf("cannot remove empty segment %s: %w", name, err)
		}
		return nil, nil
	case herr == errHeaderVersion:
		return nil, s.setAside(name, recFuture)
	case herr != nil:
		return nil, s.setAside(name, recUnreadable)
	}
	g := &segment{seq: seq, size: size, sealed: true, countedTo: headerSize}
	if !last {
		return g, s.syncInherited(f, seq, 0)
	}
	res := scanSegment(f, size, nil)
	corruptRecords.Add(float64(res.corruptRecords))
	corruptBytes.Add(float64(res.corruptBytes))
	g.countedTo = size
	if res.end < size {
		recTornTail.Inc()
		truncatedBytes.Add(float64(size - res.end))
		// A failed truncation leaves the torn bytes for readers to skip; they are counted. A
		// failed sync leaves the truncation to the segment's next sync, or to the next Open,
		// which finds the same torn tail.
		if f.Truncate(res.end) == nil {
			_ = f.Sync()
		}
		g.size = res.end
	}
	return g, s.syncInherited(f, seq, g.size)
}

// syncInherited makes durable what an earlier process left of a segment in the page cache. A
// process killed in -spool.sync=interval had acknowledged records it had not synced yet, and
// one that ran with -spool.sync=none synced nothing: without this, a power loss any time later
// would take them, however many intervals this process synced its own segments. The segment
// is only read from now on, so a sync that succeeds here covers it for good.
//
// The last segment, the one a killed process was writing, is written again from what it reads
// (its first rewrite bytes) before the sync. Its sync may have failed in that process, and the
// kernel reports a writeback error once, to the files open when it happened, having dropped
// the pages it could not write: a sync of the file alone would succeed and leave on disk what
// was there before. Writing the bytes again dirties the pages with what the page cache still
// holds, so the sync writes them. Only the last segment may hold bytes a failed sync left
// unwritten: a failed sync of the active segment in interval mode fails the spool, which
// appends nothing more, and in always mode the segment is cut back to its last good sync
// (commit.go), so that a sealed segment's bytes were all synced by the process that wrote
// them, or by none (-spool.sync=none), whose syncs never failed; a start in none mode, which
// seals the segment it inherits last without syncing it, writes it again too (below).
//
// A full disk does not stop the start (it must come up to drain): writing a segment again
// needs room on a file system that does not write in place (btrfs, ZFS, a thin volume), and so
// may its sync. The segment is then logged, counted in
// otlpgate_spool_unsynced_inherited_segments and tried again at every sync interval and
// checkpoint until it is durable or deleted (syncInheritedPending). Any other failure is a disk
// the spool cannot trust, and Open fails.
func (s *Spool) syncInherited(f File, seq uint64, rewrite int64) error {
	if s.cfg.Sync == SyncNone {
		// No sync, but the last segment is written again all the same: a process in interval
		// mode whose sync failed left it with bytes the kernel took as written, and the
		// segments this process creates make it a sealed one, which a later start in interval
		// or always mode syncs without writing it again. Rewritten here, the kernel writes it
		// back in its own time, and that sync finds nothing missing. Best effort: this mode
		// promises nothing after a crash.
		_ = rewriteFile(f, rewrite)
		return nil
	}
	name := s.path(segmentName(seq))
	err := rewriteAndSync(f, rewrite)
	switch {
	case err == nil:
	case diskFull(err):
		s.mu.inherited = append(s.mu.inherited, inheritedSync{seq: seq, rewrite: rewrite})
		unsyncedInherited.Inc()
		s.cfg.logger().Warn("spool: the disk is full, so records an earlier process left unsynced cannot be made durable yet; a power loss before they are may take them; tried again at every sync interval",
			"segment", name, "err", err)
	default:
		return fmt.Errorf("cannot make spool segment %s durable: %w", name, err)
	}
	return nil
}

// forgetInherited takes the segments still waiting for syncInheritedPending out of the gauge,
// as the spool ends.
func (s *Spool) forgetInherited() {
	s.mu.Lock()
	n := len(s.mu.inherited)
	s.mu.inherited = nil
	s.mu.Unlock()
	unsyncedInherited.Sub(float64(n))
}

// syncInheritedPending tries again to make durable the segments syncInherited found no room
// for. A segment deleted meanwhile (every destination finished it) needs it no more; one that
// still fails waits for the next try. Housekeeper only.
func (s *Spool) syncInheritedPending() {
	s.mu.Lock()
	pending := slices.Clone(s.mu.inherited)
	s.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	var done []uint64
	for _, p := range pending {
		if !s.hasSegment(p.seq) {
			done = append(done, p.seq)
			continue
		}
		name := s.path(segmentName(p.seq))
		f, err := s.fs.Open(name, true)
		if err != nil {
			continue // deleted since, or not to be opened now: the next try sees which
		}
		err = rewriteAndSync(f, p.rewrite)
		_ = f.Close()
		if err == nil {
			s.cfg.logger().Info("spool: records an earlier process left unsynced are durable now", "segment", name)
			done = append(done, p.seq)
		}
	}
	if len(done) == 0 {
		return
	}
	s.mu.Lock()
	s.mu.inherited = slices.DeleteFunc(s.mu.inherited, func(p inheritedSync) bool { return slices.Contains(done, p.seq) })
	s.mu.Unlock()
	unsyncedInherited.Sub(float64(len(done)))
}

// rewriteAndSync writes the first n bytes of f again and syncs f: what syncInherited does to a
// segment, and syncInheritedPending again to one it found no room for.
func rewriteAndSync(f File, n int64) error {
	if err := rewriteFile(f, n); err != nil {
		return err
	}
	return timedSync(f)
}

// rewriteFile writes the first n bytes of f again, as it reads them.
func rewriteFile(f File, n int64) error {
	if n == 0 {
		return nil
	}
	buf := pool.GetBytes(1 << 20)
	defer pool.PutBytes(buf)
	b := (*buf)[:cap(*buf)]
	for off := int64(0); off < n; {
		c := b[:min(int64(len(b)), n-off)]
		if _, err := f.ReadAt(c, off); err != nil {
			return err
		}
		if _, err := f.WriteAt(c, off); err != nil {
			return err
		}
		off += int64(len(c))
	}
	return nil
}

// setAside renames an unreadable segment out of the way, keeping it for inspection.
func (s *Spool) setAside(name string, outcome prometheus.Counter) error {
	if err := s.fs.Rename(name, name+asideSuffix); err != nil {
		// Not set aside, so not counted: the start fails, and the next one looks again.
		return fmt.Errorf("cannot set aside unreadable segment %s: %w", name, err)
	}
	outcome.Inc()
	return nil
}

// deleteFinished removes the sealed segments that end at or before low.
func (s *Spool) deleteFinished(low Pos) error {
	s.mu.Lock()
	var gone []uint64
	for len(s.mu.segs) > 0 {
		g := s.mu.segs[0]
		if !g.sealed || !(g.seq < low.Segment() || (g.seq == low.Segment() && low.Offset() >= g.size)) {
			break
		}
		gone = append(gone, g.seq)
		s.mu.bytes -= g.size
		s.mu.segs = s.mu.segs[1:]
	}
	curBytes.Store(s.mu.bytes)
	curSegments.Store(int64(len(s.mu.segs)))
	s.mu.Unlock()
	var err error
	for _, seq := range gone {
		if rerr := s.fs.Remove(s.path(segmentName(seq))); rerr != nil && err == nil {
			err = rerr
		}
		segDeletedFinished.Inc()
	}
	return err
}

// dropOldest deletes sealed segments, oldest first, until need more bytes fit, and reports
// whether they fit. It counts, for each destination, exactly the records it will never be
// handed: those at or after its next read in a dropped segment, but for those Next would pass
// over anyway (finished before a Rewind, appended while the destination was away). It holds
// every reader's lock meanwhile, so that no reader is halfway through reading a record it is
// counted for; once the segment is gone, Next skips it. A record already read and not finished is not counted
// here: the destination holds it in memory and delivers it (Finish), or gives it up and counts
// it under its own reason (Drop), or still holds it when the spool closes, and Close counts it
// then (countLostInFlight), since a restart cannot read it again.
func (s *Spool) dropOldest(need int64) bool {
	s.mu.Lock()
	readers := s.mu.readers // one AddReader adds meanwhile starts past every sealed segment
	s.mu.Unlock()
	for _, r := range readers {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.mu.bytes+need > s.cfg.MaxBytes {
		if len(s.mu.segs) == 0 || !s.mu.segs[0].sealed {
			return false
		}
		g := s.mu.segs[0]
		name := s.path(segmentName(g.seq))
		if f, err := s.fs.Open(name, false); err == nil {
			for _, r := range readers {
				from := r.mu.next
				if from.Segment() > g.seq {
					continue
				}
				off := int64(headerSize)
				if from.Segment() == g.seq {
					off = from.Offset()
				}
				r.dropped[dropOldest].Add(float64(countFrames(f, g.seq, off, g.size, r.handsOutLocked)))
			}
			_ = f.Close()
		}
		if t := &s.mu.tail; t.seq == g.seq {
			// A sealed segment's records may linger in the tail; none may be read after
			// being counted.
			t.buf = t.buf[:0]
		}
		if err := s.fs.Remove(name); err != nil {
			return false
		}
		segDeletedOldest.Inc()
		s.mu.bytes -= g.size
		s.mu.segs = s.mu.segs[1:]
		curBytes.Store(s.mu.bytes)
		curSegments.Store(int64(len(s.mu.segs)))
	}
	return true
}

// countFrames counts the records of segment seq from off to end that handsOut accepts (nil:
// every one), by their length fields alone, without reading payloads: it is for accounting
// only, and stops at the first implausible header.
func countFrames(f io.ReaderAt, seq uint64, off, end int64, handsOut func(Pos) bool) int {
	var h [frameSize]byte
	n := 0
	for off+frameSize <= end {
		if _, err := f.ReadAt(h[:], off); err != nil {
			break
		}
		l := int64(binary.LittleEndian.Uint32(h[4:]))
		if l > MaxRecordBytes+maxExtra || off+frameSize+l > end {
			break
		}
		if handsOut == nil || handsOut(makePos(seq, off)) {
			n++
		}
		off += frameSize + l
	}
	return n
}
