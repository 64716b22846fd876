package spool

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// A cursor file keeps one destination's durable position:
//
//	magic   [4]byte "OGSC"
//	version uint32  1, or 2 for a destination removed while the spool ran (Reader.Away)
//	pos     uint64
//	until   uint64  version 2 only: where Away was called; the records from there on are
//	                not the destination's, so a start that releases it counts only those below
//	crc     uint32  CRC32C of the bytes before it
//
// It is named by the hex of the destination name, so any name is a safe file name, and it is
// replaced atomically: written to a temporary file, synced, renamed over, directory synced. A
// release without version 2 takes such a cursor as bad and replays the whole spool to it.
const (
	cursorMagic        = "OGSC"
	cursorSize         = 20
	cursorSizeUntil    = 28
	cursorSuffix       = ".cursor"
	tmpSuffix          = ".tmp"
	cursorVersion      = 1
	cursorVersionUntil = 2
)

var (
	badCursors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_bad_cursors_total",
		Help: "Cursor files that could not be read at start-up; their destination replays the whole spool.",
	})
	checkpointErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_checkpoint_errors_total",
		Help: "Checkpoints that could not persist every position or delete every finished segment (a full disk: finished segments are still freed first); a crash replays from the older positions.",
	})
	releasedCursors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_released_destinations_total",
		Help: "Destinations whose hold on the spool was released: found at start but no longer configured, or removed by a reload and owing nothing or past -spool.removed-hold or -spool.removed-hold-bytes; what they still owed is in otlpgate_spool_dropped_records_total{reason=\"released\"} and {reason=\"removed\"}.",
	})
)

var errBadCursor = errors.New("spool: bad cursor file")

func cursorName(dest string) string { return hex.EncodeToString([]byte(dest)) + cursorSuffix }

func parseCursorName(name string) (string, bool) {
	h, ok := strings.CutSuffix(name, cursorSuffix)
	if !ok {
		return "", false
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func encodeCursor(p, until Pos) []byte {
	if until != 0 {
		return encodeCursorUntil(p, until)
	}
	b := make([]byte, 0, cursorSize)
	b = append(b, cursorMagic...)
	b = binary.LittleEndian.AppendUint32(b, cursorVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(p))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// encodeCursorUntil encodes a version 2 cursor; until 0 says the destination is not away, as a
// version 1 cursor does (clearAwayInPlace writes one so, at the length of the one it replaces).
func encodeCursorUntil(p, until Pos) []byte {
	b := make([]byte, 0, cursorSizeUntil)
	b = append(b, cursorMagic...)
	b = binary.LittleEndian.AppendUint32(b, cursorVersionUntil)
	b = binary.LittleEndian.AppendUint64(b, uint64(p))
	b = binary.LittleEndian.AppendUint64(b, uint64(until))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeCursor returns the position of a cursor and, for one written while its destination
// was away, where it went away (0 otherwise).
func decodeCursor(b []byte) (p, until Pos, err error) {
	if len(b) < cursorSize || string(b[:4]) != cursorMagic {
		return 0, 0, errBadCursor
	}
	size := cursorSize
	switch binary.LittleEndian.Uint32(b[4:]) {
	case cursorVersion:
	case cursorVersionUntil:
		size = cursorSizeUntil
	default:
		return 0, 0, errBadCursor
	}
	if len(b) != size || crc32.Checksum(b[:size-4], castagnoli) != binary.LittleEndian.Uint32(b[size-4:]) {
		return 0, 0, errBadCursor
	}
	p = Pos(binary.LittleEndian.Uint64(b[8:]))
	if size == cursorSizeUntil {
		until = Pos(binary.LittleEndian.Uint64(b[16:]))
	}
	return p, until, nil
}

// writeCursorTmp writes dest's position to its temporary file and syncs it; a rename then
// publishes it.
func (s *Spool) writeCursorTmp(dest string, p, until Pos) error {
	tmp := s.path(cursorName(dest) + tmpSuffix)
	f, err := s.fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(encodeCursor(p, until), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
	}
	return err
}

// clearAwayInPlace writes dest's cursor again in its own file, at p and without the Away mark
// it carries, for a checkpoint that found no room for the temporary file: a cursor that kept
// the mark of a destination since back would have a start that releases it count only what it
// owed before it went away, and drop what it owed since uncounted. Both cursors are version 2
// and of one length, so the write takes no room on a disk that writes in place; a crash in the
// middle of it leaves a cursor whose checksum fails, which the spool takes as bad (the spool
// replayed to it whole, or its release counted as unknown and logged), never as a position.
func (s *Spool) clearAwayInPlace(dest string, p Pos) error {
	f, err := s.fs.Open(s.path(cursorName(dest)), true)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(encodeCursorUntil(p, 0), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Spool) readCursor(name string) (p, until Pos, err error) {
	f, err := s.fs.Open(s.path(name), false)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var b [cursorSizeUntil + 1]byte
	n, _ := f.ReadAt(b[:], 0)
	return decodeCursor(b[:n])
}

// Checkpoint deletes the segments every destination has finished, then persists the position
// of every destination that moved. The housekeeper runs it every CheckpointInterval, and at once
// when an append found the spool or the disk full; Close runs it last; callers may run it too.
// Safe for concurrent use.
func (s *Spool) Checkpoint() error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	// A removed destination past its hold lets go first, so that what it held is freed now.
	err := s.releaseRemoved(time.Now())
	s.mu.Lock()
	readers := s.mu.readers
	s.mu.Unlock()

	// Free first, by the positions in memory; persist after. Freeing must not need disk space:
	// writing a cursor needs a new file, and on a full disk that is exactly what fails, so a
	// spool that freed only behind persisted cursors would never free anything again. Why
	// deleting behind positions that are not yet on disk loses nothing:
	//  1. A position only grows, and a segment is deleted only when it is sealed and wholly
	//     below every reader's position: every record in it was finished (delivered, or
	//     dropped and counted) by every destination. Sealed segments are never written again,
	//     and sequence numbers never go back (open.go), so no later record lands in it.
	//  2. A crash after the deletion and before the cursors reach disk restarts each
	//     destination at its older persisted position. What lies between that position and
	//     the first remaining segment was finished before the crash; Next skips missing
	//     segments, so it is simply not replayed (fewer duplicates, never a loss). What was
	//     not finished lies in segments that were not below every position, still present.
	//  3. A removal lost in the crash (the directory was not synced) brings a finished segment
	//     back: it is replayed at worst, as duplicates, and freed again.
	//  4. A destination added at this start holds segments by its in-memory position like any
	//     other. Its cursor is its only anchor across a crash (without one it starts again at
	//     the tail), so appends are refused until its first cursor is durable (unanchored).
	//  5. A destination whose cursor was unreadable starts at 0 and holds everything.
	//  6. An Append that finds the spool full frees the same way (reclaim), without waiting
	//     for this: it deletes by positions in memory too, and persists nothing.
	err = errors.Join(err, s.freeFinished(readers))
	err = errors.Join(err, s.persistCursors(readers))
	if err != nil {
		checkpointErrors.Inc()
	}
	return err
}

// persistCursors writes the cursor of each reader whose position, or Away, moved since its
// last one, atomically (a temporary file renamed over, the directory synced). Called with ckMu
// held.
func (s *Spool) persistCursors(readers []*Reader) error {
	var err error
	type move struct {
		r        *Reader
		p, until Pos
	}
	var moved []move
	for _, r := range readers {
		p, until := r.Position(), r.awayPos()
		if p == r.persisted && until == r.persistedUntil {
			continue
		}
		if werr := s.writeCursorTmp(r.name, p, until); werr != nil {
			if diskFull(werr) && until == 0 && r.persistedUntil != 0 {
				if ierr := s.clearAwayInPlace(r.name, p); ierr == nil {
					r.persisted, r.persistedUntil = p, 0
					continue
				}
			}
			err = errors.Join(err, werr)
			continue
		}
		moved = append(moved, move{r, p, until})
	}
	renamed := moved[:0]
	for _, m := range moved {
		if rerr := s.fs.Rename(s.path(cursorName(m.r.name)+tmpSuffix), s.path(cursorName(m.r.name))); rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		renamed = append(renamed, m)
	}
	if len(renamed) > 0 {
		if derr := s.fs.SyncDir(s.cfg.Dir); derr != nil {
			// The renames may not survive a crash: the old positions stand.
			return errors.Join(err, derr)
		}
	}
	for _, m := range renamed {
		m.r.persisted, m.r.persistedUntil = m.p, m.until
		if m.r.unanchored {
			m.r.unanchored = false
			s.unanchored.Add(-1)
		}
	}
	return err
}
