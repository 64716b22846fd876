package spool

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// ErrEmpty is returned by Reader.Next when the reader has caught up with the appends.
var ErrEmpty = errors.New("spool: no record to read")

// DropReason says why a destination gave up on a record.
type DropReason uint8

const (
	// DropRejected: the upstream answered that the record can never be accepted.
	DropRejected DropReason = iota
	// DropUndeliverable: the destination gave up for a reason of its own, which it counts.
	DropUndeliverable
	dropOldest   // the spool was full with -spool.full=drop-oldest
	dropRemoved  // removed while the spool ran, and held past its bound (removed.go)
	dropReleased // not listed at Open (removed.go)
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{"rejected", "undeliverable", "drop_oldest", "removed", "released"}

var (
	replayedRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_spool_replayed_records_total",
		Help: "Records a destination read back that were on disk at start-up: each may be a duplicate of one delivered before the restart.",
	}, []string{"destination"})
	droppedRecords = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_spool_dropped_records_total",
		Help: "Spooled records a destination will never deliver, by reason (rejected: the upstream refused them for good; undeliverable; drop_oldest: -spool.full=drop-oldest deleted them before the destination read them, or while it held them unfinished at shutdown; removed: a reload removed the destination and it still owed them past -spool.removed-hold or -spool.removed-hold-bytes; released: a start did not list the destination, which still owed them).",
	}, []string{"destination", "reason"})
	corruptRecords = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_corrupt_records_total",
		Help: "Runs of bad bytes (bad CRC or length) skipped in spool segments; reading resumed at the next valid record.",
	})
	corruptBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_corrupt_bytes_total",
		Help: "Bytes skipped in spool segments because they held no valid record.",
	})
)

// Entry describes a record handed out by Reader.Next.
type Entry struct {
	Pos    Pos
	Signal uint8
	Items  uint32
	Size   int // the record's bytes, as appended: neither meta nor encoding included
	// Meta is the record's meta (Record.Meta), nil when it has none. Valid until the next call
	// to Next; copy to retain.
	Meta []byte
	// Encoding is how the record's bytes are compressed (Record.Encoding), as the caller
	// numbers it; 0: they are plain.
	Encoding uint8
	// Plain is the record's inflated length: Size when Encoding is 0.
	Plain int
}

// Reader reads the spool for one destination, oldest record first, and tracks which records
// the destination finished. Next must be called from one goroutine at a time; Finish, Drop,
// Position and Ready are safe for concurrent use.
//
// The destination's durable position is its lowest unfinished record: Checkpoint persists it,
// and a restart reads again from there, so a record finished out of order above an unfinished
// one is read twice after a crash (at least once, never lost).
//
// Lock order: a Reader's mu comes before Spool.mu (Next looks up segments under it, and
// drop-oldest takes every reader's lock before the spool's).
type Reader struct {
	s     *Spool
	name  string
	ready chan struct{}

	durable   atomic.Uint64 // lowest unfinished Pos, or the next to read
	persisted Pos           // guarded by Spool.ckMu; ^Pos(0) while no cursor of it is on disk
	// persistedUntil is the Away position the cursor on disk carries (0: none). Guarded by
	// Spool.ckMu.
	persistedUntil Pos
	// unanchored: a destination new at this start whose first cursor is not durable yet.
	// Guarded by Spool.ckMu.
	unanchored bool

	mu struct {
		sync.Mutex
		next     Pos
		f        File
		fseq     uint64
		inflight []inflight // read and not finished, in read order, from head
		head     int
		// skip holds, in order, the records at or after next that were finished before a Rewind:
		// Next passes over them instead of handing them out again.
		skip []Pos
		// gaps are the stretches of the log appended while the destination was away
		// (Away..Back), in order: Next passes over them.
		gaps   []gap
		awayAt Pos // set by Away, until Back; 0: here
		// awaySince is when Away was called: the hold on what it owes runs from then.
		awaySince time.Time
		// released: the reader's hold was let go (removed.go); it hands out nothing more, and
		// finishing what it held does nothing.
		released bool
		meta     []byte // the last record's meta, handed out in Entry.Meta
	}

	replayed prometheus.Counter
	dropped  [numDropReasons]prometheus.Counter
}

type inflight struct {
	pos  Pos
	done bool
}

// gap is a stretch [from, to) of the log that is not the reader's destination's.
type gap struct{ from, to Pos }

func newReader(s *Spool, name string, at Pos) *Reader {
	r := &Reader{s: s, name: name, ready: make(chan struct{}, 1), persisted: at}
	r.mu.next = at
	r.durable.Store(uint64(at))
	r.replayed = replayedRecords.WithLabelValues(name)
	for i := range r.dropped {
		r.dropped[i] = droppedRecords.WithLabelValues(name, dropReasonNames[i])
	}
	return r
}

// Name returns the destination name the reader belongs to.
func (r *Reader) Name() string { return r.name }

// Ready receives a value after appends made new records readable. Safe for concurrent use.
func (r *Reader) Ready() <-chan struct{} { return r.ready }

// Position returns the durable position: the lowest record not yet finished. Safe for
// concurrent use.
func (r *Reader) Position() Pos { return Pos(r.durable.Load()) }

// Next reads the next record, appending its payload to *buf (replacing *buf by a larger pooled
// buffer from pool.GetBytes if needed; the caller owns *buf and returns it with pool.PutBytes).
// It returns ErrEmpty when the reader has caught up; Ready signals more. Bad bytes are skipped
// and counted. Every record returned must later be finished with Finish or Drop. Not safe for
// concurrent use with itself.
func (r *Reader) Next(buf *[]byte) (Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	start := len(*buf)
	if r.mu.released {
		return Entry{}, ErrEmpty // its destination is gone for good
	}
	for {
		for _, g := range r.mu.gaps {
			if r.mu.next >= g.from && r.mu.next < g.to {
				r.setNextLocked(g.to)
			}
		}
		limit := Pos(s.readable.Load())
		if r.mu.next >= limit {
			return Entry{}, ErrEmpty
		}
		if fr, ok := s.readTail(r.mu.next, limit, buf); ok {
			readsMemory.Inc()
			if r.skipLocked(fr) {
				*buf = (*buf)[:start]
				continue
			}
			return r.emitLocked(fr, buf, start), nil
		}
		seq := r.mu.next.Segment()
		seg, size, sealed := s.segmentFrom(seq)
		if seg == nil {
			return Entry{}, ErrEmpty
		}
		if seg.seq != seq {
			// The segment is gone (finished or dropped) or was never created: skip ahead.
			r.setNextLocked(makePos(seg.seq, headerSize))
			continue
		}
		if r.mu.f == nil || r.mu.fseq != seq {
			f, err := s.fs.Open(s.path(segmentName(seq)), false)
			if err != nil {
				return Entry{}, err
			}
			r.closeFileLocked()
			r.mu.f, r.mu.fseq = f, seq
		}
		end := size
		if limit.Segment() == seq {
			end = min(end, limit.Offset())
		}
		off := r.mu.next.Offset()
		if off >= end {
			if sealed && limit.Segment() != seq {
				r.setNextLocked(makePos(seq+1, headerSize))
				continue
			}
			return Entry{}, ErrEmpty
		}
		fr, err := readFrame(r.mu.f, off, end, buf)
		if err != nil {
			if err != errBadFrame && err != errShortRead {
				return Entry{}, err
			}
			skip := nextFrame(r.mu.f, off+1, end)
			s.countCorrupt(seg, off, skip)
			r.setNextLocked(makePos(seq, skip))
			continue
		}
		readsDisk.Inc()
		if r.skipLocked(fr) {
			*buf = (*buf)[:start]
			continue
		}
		return r.emitLocked(fr, buf, start), nil
	}
}

// skipLocked passes over the record fr just read at r.mu.next when it was finished before a
// Rewind, and reports whether it did.
func (r *Reader) skipLocked(fr frame) bool {
	pos := r.mu.next
	for len(r.mu.skip) > 0 && r.mu.skip[0] < pos {
		r.mu.skip = r.mu.skip[1:] // its segment is gone: nothing to skip there any more
	}
	if len(r.mu.skip) == 0 || r.mu.skip[0] != pos {
		return false
	}
	r.mu.skip = r.mu.skip[1:]
	if r.mu.head < len(r.mu.inflight) {
		// A later Rewind goes back to the first unfinished record, before this one: it must
		// find it finished again.
		r.mu.inflight = append(r.mu.inflight, inflight{pos: pos, done: true})
	}
	r.setNextLocked(makePos(pos.Segment(), pos.Offset()+frameSize+int64(fr.length)))
	return true
}

// Rewind makes the reader hand out again, from its durable position, every record it handed
// out that was not finished: what a destination that was stopped left unfinished (a destination
// removed, or replaced, while otlpgate runs) is read again for the one that takes its place.
// Records finished out of order above the durable position are passed over, not handed out
// twice; unfinished records whose segment -spool.full=drop-oldest deleted meanwhile are counted
// as dropped. Call it only when no record of the reader is held: the feeder stopped and its
// destination finished every batch. Safe for concurrent use, but not with Next.
func (r *Reader) Rewind() {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.mu.inflight[r.mu.head:]
	if len(q) == 0 {
		return // nothing handed out is unfinished
	}
	var skip []Pos
	for _, e := range q {
		switch {
		case e.done:
			skip = append(skip, e.pos)
		case !r.s.hasSegment(e.pos.Segment()):
			r.dropped[dropOldest].Inc()
		}
	}
	// What an earlier Rewind left to skip lies ahead of every record handed out since.
	r.mu.skip = append(skip, r.mu.skip...)
	r.mu.inflight, r.mu.head = r.mu.inflight[:0], 0
	r.setNextLocked(q[0].pos)
}

// emitLocked hands out the record fr just read at r.mu.next, whose payload *buf holds from
// start: its meta and encoding, if any, are cut off the end, the meta into r.mu.meta.
func (r *Reader) emitLocked(fr frame, buf *[]byte, start int) Entry {
	pos := r.mu.next
	r.mu.inflight = append(r.mu.inflight, inflight{pos: pos})
	r.setNextLocked(makePos(pos.Segment(), pos.Offset()+frameSize+int64(fr.length)))
	if pos < r.s.tailOpen {
		r.replayed.Inc()
	}
	e := Entry{Pos: pos, Signal: fr.signal, Items: fr.items, Size: int(fr.length)}
	e.Plain = e.Size
	if fr.flags != 0 {
		t, _ := fr.trailer((*buf)[start:]) // readFrame checked it; the tail holds frames Append built
		if t.meta != nil {
			r.mu.meta = append(r.mu.meta[:0], t.meta...)
			e.Meta = r.mu.meta
		}
		e.Size -= t.size
		e.Plain = e.Size
		if t.encoding != 0 {
			e.Encoding, e.Plain = t.encoding, int(t.plain)
		}
		*buf = (*buf)[:start+e.Size]
	}
	return e
}

func (r *Reader) setNextLocked(p Pos) {
	if r.mu.f != nil && p.Segment() != r.mu.fseq {
		// Leaving the segment: keep no handle on it, or its space would stay taken after
		// the checkpoint deletes it (a removed file is freed when its last handle closes).
		r.closeFileLocked()
	}
	r.mu.next = p
	if r.mu.head == len(r.mu.inflight) {
		r.durable.Store(uint64(p))
	}
}

// Finish marks the record at pos delivered. Finishing an unknown or finished record does
// nothing. Safe for concurrent use.
func (r *Reader) Finish(pos Pos) { r.finish(pos) }

// Drop marks the record at pos finished without delivery, counted under reason. Safe for
// concurrent use.
func (r *Reader) Drop(pos Pos, reason DropReason) {
	if r.finish(pos) && reason < numDropReasons {
		r.dropped[reason].Inc()
	}
}

func (r *Reader) finish(pos Pos) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.mu.inflight[r.mu.head:]
	i, found := slices.BinarySearchFunc(q, pos, func(e inflight, p Pos) int {
		switch {
		case e.pos < p:
			return -1
		case e.pos > p:
			return 1
		}
		return 0
	})
	if !found || q[i].done {
		return false
	}
	q[i].done = true
	for r.mu.head < len(r.mu.inflight) && r.mu.inflight[r.mu.head].done {
		r.mu.head++
	}
	if r.mu.head == len(r.mu.inflight) {
		r.mu.inflight, r.mu.head = r.mu.inflight[:0], 0
		r.durable.Store(uint64(r.mu.next))
		return true
	}
	r.durable.Store(uint64(r.mu.inflight[r.mu.head].pos))
	if r.mu.head > len(r.mu.inflight)/2 {
		n := copy(r.mu.inflight, r.mu.inflight[r.mu.head:])
		r.mu.inflight, r.mu.head = r.mu.inflight[:n], 0
	}
	return true
}

// Unfinished returns how many records were read and not yet finished. Safe for concurrent use.
func (r *Reader) Unfinished() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unfinishedLocked()
}

// unfinishedLocked counts the records read and not yet finished.
func (r *Reader) unfinishedLocked() int {
	n := 0
	for _, e := range r.mu.inflight[r.mu.head:] {
		if !e.done {
			n++
		}
	}
	return n
}

func (r *Reader) closeFileLocked() {
	if r.mu.f != nil {
		_ = r.mu.f.Close()
		r.mu.f = nil
	}
}

// Away marks the reader's destination gone (removed while otlpgate runs): what is appended
// from now on is not its own. The reader keeps its hold on the spool, and what it was owed
// until now, for Back. Safe for concurrent use, but not with Next.
func (r *Reader) Away() {
	r.s.mu.Lock()
	at := r.s.mu.written // every record placed so far, synced or not, was admitted before
	r.s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.awayAt == 0 {
		r.mu.awayAt, r.mu.awaySince = at, time.Now()
	}
}

// Back ends Away: what is appended from now on is the destination's again, and Next passes
// over what was appended in between. Safe for concurrent use, but not with Next.
func (r *Reader) Back() {
	// Not written: a failed sync can cut written back (SyncAlways), and records appended after
	// that would land inside the gap. Records between readable and written, admitted while
	// the destination came back, are read.
	at := Pos(r.s.readable.Load())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.awayAt == 0 {
		return
	}
	if at > r.mu.awayAt {
		r.mu.gaps = append(r.mu.gaps, gap{r.mu.awayAt, at})
	}
	r.mu.awayAt = 0
	// Gaps wholly behind the durable position can never be read again.
	durable := Pos(r.durable.Load())
	r.mu.gaps = slices.DeleteFunc(r.mu.gaps, func(g gap) bool { return g.to <= durable })
}

// handsOutLocked reports whether Next, reading on from before p, would hand out the record at
// p: not when the destination finished it before a Rewind, nor when it was appended while the
// destination was away. Drop-oldest counts only those (a record that is not the destination's
// is not lost to it).
func (r *Reader) handsOutLocked(p Pos) bool {
	if r.mu.awayAt != 0 && p >= r.mu.awayAt {
		return false
	}
	for _, g := range r.mu.gaps {
		if p >= g.from && p < g.to {
			return false
		}
	}
	_, skipped := slices.BinarySearch(r.mu.skip, p)
	return !skipped
}

// hasSegment reports whether segment seq is still in the spool.
func (s *Spool) hasSegment(seq uint64) bool {
	g, _, _ := s.segmentFrom(seq)
	return g != nil && g.seq == seq
}

// countLostInFlight counts, at Close, the records the destination read and never finished
// whose segment drop-oldest deleted: a restart cannot read them again.
func (r *Reader) countLostInFlight() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.mu.inflight[r.mu.head:] {
		if e.done {
			continue
		}
		if g, _, _ := r.s.segmentFrom(e.pos.Segment()); g == nil || g.seq != e.pos.Segment() {
			r.dropped[dropOldest].Inc()
		}
	}
}

func (r *Reader) close() {
	r.mu.Lock()
	r.closeFileLocked()
	r.mu.Unlock()
}

// segmentFrom returns the first segment with a sequence number of at least seq, with its size
// and whether it is sealed, or nil.
func (s *Spool) segmentFrom(seq uint64) (*segment, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.mu.segs, seq, func(g *segment, q uint64) int {
		switch {
		case g.seq < q:
			return -1
		case g.seq > q:
			return 1
		}
		return 0
	})
	if i == len(s.mu.segs) {
		return nil, 0, false
	}
	g := s.mu.segs[i]
	return g, g.size, g.sealed
}

// countCorrupt counts the bad bytes [from, to) of seg unless another reader already did.
func (s *Spool) countCorrupt(seg *segment, from, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from < seg.countedTo {
		return
	}
	seg.countedTo = to
	corruptRecords.Inc()
	corruptBytes.Add(float64(to - from))
}
