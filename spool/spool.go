package spool

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/internal/statusmetrics"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Errors of Append. ErrFull and ErrIO are retryable: the client should be told to come back.
var (
	ErrFull     = errors.New("spool: full (-spool.max-bytes reached)")
	ErrIO       = errors.New("spool: write failed")
	ErrTooLarge = errors.New("spool: record exceeds the maximum record size")
	ErrClosed   = errors.New("spool: closed")
	// ErrSyncFailed: an fdatasync failed after the records it was to cover had been
	// acknowledged (-spool.sync=interval); they may not be on disk. The spool refuses appends
	// from then on; see Spool.Failed.
	ErrSyncFailed = errors.New("spool: fdatasync failed: records acknowledged since the last good sync may not be on disk")
)

// errUnanchored is wrapped in ErrIO while a destination new at this start has no cursor on disk.
var errUnanchored = errors.New("spool: a new destination's cursor is not on disk yet")

// The gauges read these; the process runs one spool, and the last one opened owns them.
var (
	curBytes    atomic.Int64
	curSegments atomic.Int64
	curMaxBytes atomic.Int64
)

var (
	_ = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_spool_bytes",
		Help: "Bytes of all spool segments on disk (bounded by -spool.max-bytes).",
	}, func() float64 { return float64(curBytes.Load()) })
	_ = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_spool_segments",
		Help: "Spool segment files on disk.",
	}, func() float64 { return float64(curSegments.Load()) })
	_ = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_spool_max_bytes",
		Help: "The bound of otlpgate_spool_bytes (-spool.max-bytes): alert on their ratio.",
	}, func() float64 { return float64(curMaxBytes.Load()) })
	appendedRecords = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_appended_records_total",
		Help: "Records appended to the spool.",
	})
	appendedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_appended_bytes_total",
		Help: "Bytes appended to the spool, framing included.",
	})
	appendErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_spool_append_errors_total",
		Help: "Appends refused, by reason (full: -spool.max-bytes reached with -spool.full=refuse; io: write, sync or segment creation failed; too_large).",
	}, []string{"reason"})
	appendErrFull     = appendErrors.WithLabelValues("full")
	appendErrIO       = appendErrors.WithLabelValues("io")
	appendErrTooLarge = appendErrors.WithLabelValues("too_large")
	segmentsCreated   = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_segments_created_total",
		Help: "Spool segment files created.",
	})
	segmentsDeleted = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_spool_segments_deleted_total",
		Help: "Spool segment files deleted, by reason (finished: every destination finished them; drop_oldest: -spool.full=drop-oldest made room).",
	}, []string{"reason"})
	segDeletedFinished = segmentsDeleted.WithLabelValues("finished")
	segDeletedOldest   = segmentsDeleted.WithLabelValues("drop_oldest")
)

// Spool is an append-only log of records in segment files, read back by one Reader per
// destination. Append is safe for concurrent use; see Reader for its rules.
//
// Invariants:
//  1. mu.segs is ordered by seq; only its last element may be unsealed, and then it is the
//     segment mu.active writes to.
//  2. readable <= written: readers never see a record whose Append has not returned (in
//     SyncAlways mode: whose sync has not completed), so nothing reaches a destination that
//     a client was told failed, and nothing half-written is ever read.
//  3. A segment is removed only when it is sealed and every reader's position in memory is
//     past it (Checkpoint argues why that survives crashes), or by drop-oldest, which counts
//     exactly what it drops.
//  4. mu.nextSeq is above every segment and every cursor position the directory held at Open
//     and every segment created since: a new record lands above every reader's position.
//  5. No segment is synced again after a sync of it failed (syncFailedLocked), and no two
//     syncs of the active segment run at once (mu.syncing).
type Spool struct {
	cfg Config
	fs  FS
	// unlock gives back the directory's lock (Locker); nil without one. Set by Open, taken
	// by Close.
	unlock func() error

	mu struct {
		sync.Mutex
		segs   []*segment
		active *fileRef // nil until the first append, and after a failed rotation
		// activeVersion is the active segment's version; encoded is set once a compressed
		// record was appended by this process: segments created from then on are version 3.
		activeVersion uint32
		encoded       bool
		off           int64  // write offset in the active segment
		nextSeq       uint64 // sequence number of the next segment to create
		broken        bool   // the active segment must be sealed before the next write
		syncing       bool   // a sync of the active segment runs outside the lock (sync)
		failed        error  // set once acknowledged records may be lost (syncFailedLocked)
		bytes         int64
		written       Pos // end of the last record written
		synced        Pos // end of the last record known durable
		waiters       []*waiter
		spare         []*waiter
		closed        bool
		readers       []*Reader
		tail          tail // the newest records, for readers that caught up (tail.go)
		// unflushed is how many bytes at the end of the active segment, [off-unflushed, off),
		// are in the tail and not yet written (SyncAlways only): the next commit writes them.
		unflushed int64
		ages      []ageMark // when records were appended, sparse (age.go)
		// inherited: segments an earlier process left unsynced that a full disk kept Open
		// from making durable (syncInherited); the housekeeper tries them again.
		inherited []inheritedSync
	}
	wbuf *[]byte // frame being written; guarded by mu

	readable   atomic.Uint64 // Pos up to which readers may read (invariant 2)
	unanchored atomic.Int32  // destinations whose first cursor is not durable yet (Checkpoint)
	tailOpen   Pos           // end of the log at Open: records before it are replays
	// releasedAtOpen: the destinations Open released (removed.go); read-only after Open.
	releasedAtOpen []Released
	opened         time.Time // when Open began; the age index counts from it (age.go)

	ckMu sync.Mutex // serialises Checkpoint

	syncDone *sync.Cond    // on mu; broadcast when a sync outside the lock ends
	failedc  chan struct{} // closed when mu.failed is set

	commitc chan struct{} // kicks the committer (SyncAlways)
	housec  chan struct{} // kicks the housekeeper (space needed)
	done    chan struct{}
	wg      sync.WaitGroup
}

// segment is what the spool knows of one segment file.
type segment struct {
	seq    uint64
	size   int64 // guarded by Spool.mu
	sealed bool  // guarded by Spool.mu
	// countedTo is the offset up to which corruption in this segment has been counted, so that
	// several readers crossing the same bad bytes count them once. Guarded by Spool.mu.
	countedTo int64
}

// fileRef shares a segment's write handle between the appenders and the committer, which
// syncs it outside the lock; the last of rotation and an in-flight sync closes it.
type fileRef struct {
	f    File
	seq  uint64
	refs atomic.Int32
}

func (r *fileRef) acquire() { r.refs.Add(1) }

func (r *fileRef) release() {
	if r.refs.Add(-1) == 0 {
		_ = r.f.Close()
	}
}

// waiter is an Append waiting for its sync in SyncAlways mode.
type waiter struct {
	pos Pos
	ch  chan error
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan error, 1)} }}

func (s *Spool) path(name string) string { return filepath.Join(s.cfg.Dir, name) }

// TakesEncoded reports whether the spool takes compressed records (Config.Encoded). Safe for
// concurrent use.
func (s *Spool) TakesEncoded() bool { return s.cfg.Encoded }

// Record is one record as it is appended: what the spool writes and Reader.Next hands back in
// an Entry.
type Record struct {
	Signal uint8
	Items  uint32
	// Meta travels beside the payload (at most MaxMetaBytes; the tenant of the request), handed
	// back in Entry.Meta. Only a spool with Config.Meta takes it.
	Meta []byte
	// Encoding is the compression of Prefix and Payload, as the caller numbers encodings (0:
	// plain), and Plain the size they inflate to, handed back in Entry.Encoding and
	// Entry.Plain. Only a spool with Config.Encoded takes a compressed record.
	Encoding uint8
	Plain    uint32
	// Prefix and Payload are the record's bytes, Prefix first (it may be nil): a caller puts a
	// few bytes before what it received without copying it first. Neither is retained.
	Prefix, Payload []byte
}

// Append writes r and returns its position once it is as durable as the sync mode promises.
// It returns ErrFull (the spool holds MaxBytes and the policy is refuse, or nothing is left to
// drop), ErrIO wrapping the cause (the disk refused; a later Append may succeed), ErrTooLarge
// or ErrClosed. Safe for concurrent use.
func (s *Spool) Append(r Record) (Pos, error) {
	signal, items, meta, enc, plain, prefix, payload := r.Signal, r.Items, r.Meta, r.Encoding, r.Plain, r.Prefix, r.Payload
	if len(prefix)+len(payload) > MaxRecordBytes || len(meta) > MaxMetaBytes {
		appendErrTooLarge.Inc()
		return 0, ErrTooLarge
	}
	if len(meta) > 0 && !s.cfg.Meta {
		panic("BUG: spool: meta appended to a spool without Config.Meta")
	}
	if enc != 0 && !s.cfg.Encoded {
		panic("BUG: spool: a compressed record appended to a spool without Config.Encoded")
	}
	if s.unanchored.Load() != 0 {
		appendErrIO.Inc()
		s.kickHousekeeper()
		return 0, fmt.Errorf("%w: %w", ErrIO, errUnanchored)
	}
	n := frameLen(len(prefix)+len(payload), meta, enc)
	s.mu.Lock()
	var rotate, reclaimed bool
	var need int64
	for {
		if s.mu.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		if s.mu.failed != nil {
			err := s.mu.failed
			s.mu.Unlock()
			appendErrIO.Inc()
			return 0, fmt.Errorf("%w: %w", ErrIO, err)
		}
		if s.mu.unflushed > 0 && !s.tailTakesLocked(n) {
			// The tail must be written out before it is reused; a failure answers the appends
			// it held and moves s.mu.off back.
			_ = s.flushLocked()
		}
		if enc != 0 {
			s.mu.encoded = true
		}
		// A compressed record goes to a version 3 segment only, so that a release that
		// cannot read it sets the segment aside rather than skip the record as corrupt.
		rotate = s.mu.active == nil || s.mu.broken ||
			(s.mu.off+n > s.cfg.SegmentBytes && s.mu.off > headerSize) ||
			(enc != 0 && s.mu.activeVersion < segmentVersionEncoded)
		if rotate && s.mu.syncing {
			// Rotation syncs the segment it seals; it waits for the sync in flight on it, so
			// that no sync can succeed on a segment while another fails on it
			// (syncFailedLocked).
			s.syncDone.Wait()
			continue
		}
		need = n
		if rotate {
			need += headerSize
		}
		if s.mu.bytes+need <= s.cfg.MaxBytes {
			break
		}
		if !reclaimed {
			// Segments every destination finished may only be waiting for the next
			// checkpoint: free them now, once, and look at everything again, rather than
			// refuse a client although the destinations caught up (reclaim).
			reclaimed = true
			s.mu.Unlock()
			s.reclaim()
			s.mu.Lock()
			continue
		}
		ok := false
		if s.cfg.Full == FullDropOldest {
			// dropOldest takes the readers' locks, which come before mu; everything is
			// looked at again afterwards.
			s.mu.Unlock()
			ok = s.dropOldest(need)
			s.mu.Lock()
		}
		if !ok {
			s.mu.Unlock()
			appendErrFull.Inc()
			s.kickHousekeeper()
			return 0, ErrFull
		}
	}
	if rotate {
		if err := s.rotateLocked(); err != nil {
			s.mu.Unlock()
			appendErrIO.Inc()
			s.kickHousekeeper() // a full disk: free what is finished now
			return 0, fmt.Errorf("%w: %w", ErrIO, err)
		}
	}
	ref, off := s.mu.active, s.mu.off
	dst, inTail := s.frameBufLocked(ref.seq, off, n)
	start := len(dst)
	dst = appendRecordFrame(dst, signal, items, meta, enc, plain, prefix, payload)
	if inTail {
		s.mu.tail.buf = dst
	} else {
		*s.wbuf = dst
	}
	// SyncAlways: a frame built in the tail is written by the commit that syncs it, with all
	// the others gathered since the last one, in one write (flushLocked).
	deferred := inTail && s.cfg.Sync == SyncAlways
	if deferred {
		s.mu.unflushed += n
	} else if _, err := ref.f.WriteAt(dst[start:], off); err != nil {
		// A short write leaves a partial frame; cut it off so the next record follows the
		// last whole one. If even that fails, seal the segment: readers skip a bad tail.
		if inTail {
			s.mu.tail.buf = dst[:start]
		}
		if terr := ref.f.Truncate(off); terr != nil {
			s.mu.broken = true
		}
		s.mu.Unlock()
		appendErrIO.Inc()
		s.kickHousekeeper()
		return 0, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if !inTail && cap(*s.wbuf) > pool.MaxSize/4 {
		// Keep the frame buffer sized for the common record, not the rare large one.
		pool.PutBytes(s.wbuf)
		s.wbuf = pool.GetBytes(pool.MinSize)
	}
	pos := makePos(ref.seq, off)
	s.markAgeLocked(pos)
	s.mu.off += n
	s.mu.bytes += n
	curBytes.Store(s.mu.bytes)
	s.mu.segs[len(s.mu.segs)-1].size = s.mu.off
	s.mu.written = makePos(ref.seq, s.mu.off)
	appendedRecords.Inc()
	appendedBytes.Add(float64(n))
	if s.cfg.Sync != SyncAlways {
		s.readable.Store(uint64(s.mu.written))
		s.notifyReadersLocked()
		s.mu.Unlock()
		return pos, nil
	}
	w := waiterPool.Get().(*waiter)
	w.pos = pos
	s.mu.waiters = append(s.mu.waiters, w)
	s.mu.Unlock()
	select {
	case s.commitc <- struct{}{}:
	default: // a kick is pending; the committer will see this waiter
	}
	err := <-w.ch
	waiterPool.Put(w)
	if err != nil {
		s.kickHousekeeper()
		return 0, fmt.Errorf("%w: %w", ErrIO, err)
	}
	return pos, nil
}

// rotateLocked seals the active segment, making it durable first unless the mode is none, and
// creates the next one with a durable directory entry.
func (s *Spool) rotateLocked() error {
	if ref := s.mu.active; ref != nil {
		_ = s.flushLocked() // a failure answered the appends it held
		if s.cfg.Sync != SyncNone && s.mu.synced < s.mu.written {
			if err := timedSync(ref.f); err != nil {
				s.syncFailedLocked(err)
				return err
			}
			s.mu.synced = s.mu.written
		}
		s.releaseWaitersLocked(s.mu.waiters, nil)
		s.mu.waiters = s.mu.waiters[:0]
		if s.cfg.Sync == SyncAlways {
			s.readable.Store(uint64(s.mu.written))
			s.notifyReadersLocked()
		}
		s.mu.segs[len(s.mu.segs)-1].sealed = true
		s.mu.active = nil
		ref.release()
	}
	s.mu.broken = false
	seq := s.mu.nextSeq
	name := s.path(segmentName(seq))
	f, err := s.fs.Create(name)
	if err != nil {
		return err
	}
	version := uint32(segmentVersion)
	switch {
	case s.mu.encoded:
		version = segmentVersionEncoded
	case s.cfg.Meta:
		version = segmentVersionMeta
	}
	hdr := appendSegmentHeaderVersion(make([]byte, 0, headerSize), seq, version)
	if _, err = f.WriteAt(hdr, 0); err == nil && s.cfg.Sync != SyncNone {
		if err = f.Sync(); err == nil {
			err = s.fs.SyncDir(s.cfg.Dir)
		}
	}
	if err != nil {
		_ = f.Close()
		_ = s.fs.Remove(name)
		return err
	}
	s.mu.nextSeq++
	ref := &fileRef{f: f, seq: seq}
	ref.refs.Store(1)
	s.mu.active, s.mu.activeVersion = ref, version
	s.mu.off = headerSize
	s.mu.segs = append(s.mu.segs, &segment{seq: seq, size: headerSize, countedTo: headerSize})
	s.mu.bytes += headerSize
	curBytes.Store(s.mu.bytes)
	curSegments.Store(int64(len(s.mu.segs)))
	segmentsCreated.Inc()
	// The new segment's start is the end of the old one for readers and syncs alike.
	if s.mu.synced == s.mu.written {
		s.mu.synced = makePos(seq, headerSize)
	}
	s.mu.written = makePos(seq, headerSize)
	return nil
}

// releaseWaitersLocked answers waiters; their channels have room, so this never blocks.
func (s *Spool) releaseWaitersLocked(ws []*waiter, err error) {
	for i, w := range ws {
		if err != nil {
			// The group commit's fdatasync failed: each append it held is refused like any
			// other the disk refused, and counted with them.
			appendErrIO.Inc()
		}
		w.ch <- err
		ws[i] = nil
	}
}

func (s *Spool) notifyReadersLocked() {
	for _, r := range s.mu.readers {
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
}

func (s *Spool) kickHousekeeper() {
	select {
	case s.housec <- struct{}{}:
	default:
	}
}

// Close makes what was appended durable (unless the mode is none), persists every reader's
// position and closes the files. Appends after Close fail with ErrClosed; Readers must not be
// used after it. Safe for concurrent use; the second call does nothing.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	ageSpool.CompareAndSwap(s, nil)
	close(s.done)
	s.wg.Wait()
	var err error
	if s.cfg.Sync != SyncNone {
		err = s.sync()
		s.syncInheritedPending()
	}
	s.forgetInherited()
	if cerr := s.Checkpoint(); err == nil {
		err = cerr
	}
	for _, r := range s.releaseFiles() {
		r.countLostInFlight()
		r.close()
	}
	pool.PutBytes(s.wbuf)
	if uerr := s.release(); err == nil {
		err = uerr
	}
	return err
}

// release gives back the directory's lock (Locker), once.
func (s *Spool) release() error {
	unlock := s.unlock
	s.unlock = nil
	if unlock == nil {
		return nil
	}
	return unlock()
}

// AddReader returns the reader of destination, adding one when the spool has none: a
// destination added while otlpgate runs reads every record appended from now on. A removed
// destination's reader that was not released yet (removed.go) is back (Reader.Back); one that
// was is gone, and the destination is new. Its cursor is
// durable before the reader is added, so that a crash cannot start it again at a later tail,
// past records acknowledged in between (appends are not held up meanwhile, as they are for a
// destination new at Open). A reader is never removed while the spool is open: a destination
// that goes away keeps its hold, and its records, until it comes back or a start without it
// releases them. Safe for concurrent use.
func (s *Spool) AddReader(destination string) (*Reader, error) {
	s.ckMu.Lock() // no checkpoint in between: it could delete what the new reader needs
	defer s.ckMu.Unlock()
	if r := s.Reader(destination); r != nil {
		// A removed destination back before its hold ended: from now on it is here again, and
		// no checkpoint can release it between this and the caller's Back.
		r.Back()
		if r.persistedUntil != 0 {
			// Its cursor on disk still says where it went away, and a start that does not
			// list it would count as released only what it owed before that: the records
			// appended since it came back, which are its own, would be dropped uncounted.
			// The cursor is written now rather than at the next checkpoint.
			if err := s.persistCursors([]*Reader{r}); err != nil {
				checkpointErrors.Inc()
				s.cfg.logger().Warn("spool: the cursor of a destination back from removal could not be written; until the next checkpoint writes it, a start without that destination would count too few of its records as released",
					"destination", destination, "err", err)
			}
		}
		return r, nil
	}
	// Every record appended from here on lies at or after at.
	at := Pos(s.readable.Load())
	if err := s.writeCursorTmp(destination, at, 0); err != nil {
		return nil, fmt.Errorf("cannot write the cursor of %q: %w", destination, err)
	}
	if err := s.fs.Rename(s.path(cursorName(destination)+tmpSuffix), s.path(cursorName(destination))); err != nil {
		_ = s.fs.Remove(s.path(cursorName(destination) + tmpSuffix))
		return nil, fmt.Errorf("cannot write the cursor of %q: %w", destination, err)
	}
	if err := s.fs.SyncDir(s.cfg.Dir); err != nil {
		return nil, fmt.Errorf("cannot sync spool dir %s: %w", s.cfg.Dir, err)
	}
	r := newReader(s, destination, at)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	s.mu.readers = append(s.mu.readers, r)
	return r, nil
}

// Written is the end of the records placed so far: every record appended before the call lies
// before it, and one appended after it lies at or after it (but for a failed sync under
// SyncAlways, which cuts the log back, as for Reader.Away). A reload that changes which
// destination takes which record marks with it the records that go by the routes of before.
// Safe for concurrent use.
func (s *Spool) Written() Pos {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.written
}

// Bytes is what the segments take on disk, framing included: what MaxBytes bounds. Safe for
// concurrent use.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.bytes
}

// Fill is Bytes less the segment being written (what deliveries can free), and MaxBytes. The
// active segment goes only once it is sealed and every reader finished it, so a writer that
// waits for the spool to shrink must not count it, or it would wait for its own next append:
// the Kafka consumer takes its share of this. Safe for concurrent use.
func (s *Spool) Fill() (sealed, limit int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.active == nil {
		return s.mu.bytes, s.cfg.MaxBytes
	}
	return s.mu.bytes - s.mu.off, s.cfg.MaxBytes
}

// Reader returns the reader of a destination listed at Open, or nil. Safe for concurrent use.
func (s *Spool) Reader(destination string) *Reader {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.mu.readers {
		if r.name == destination {
			return r
		}
	}
	return nil
}

// releaseFiles lets go of the active segment's handle and returns the readers, whose files the
// caller closes: the last step of Close, and of a test's simulated crash.
func (s *Spool) releaseFiles() []*Reader {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.active != nil {
		s.mu.active.release()
		s.mu.active = nil
	}
	return s.mu.readers
}
