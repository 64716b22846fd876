package spool

import (
	"errors"
	"os"
	"slices"
	"time"
)

// A destination a reload removes while the spool runs goes away (Reader.Away): it keeps its
// reader, its hold on the spool and the records it still owes, so that a reload that brings it
// back (AddReader) finds them. The hold is bounded, or a removed destination would pin the
// spool for good and a full spool would refuse every request, though every destination still
// configured caught up: removing a destination is how an operator gets out of an outage.
//
// At each checkpoint a removed destination is released when it owes nothing (it finished
// every record appended before it went away), when it went away Config.RemovedHold ago, or
// when it holds more than Config.RemovedHoldBytes (the segments from its position to the end
// of the log). Releasing it counts what it still owed as dropped, reason "removed": the
// records it had read and not finished (its drain may still deliver some: they are counted
// all the same, and finishing them afterwards does nothing) and those it had not read, up to
// where it went away, but for those it would have passed over (finished before a Rewind,
// appended while it was away before). It logs them with its name, removes its cursor, and the
// reader hands out nothing more; a reload that brings the name back later gets a new reader at
// the tail (AddReader).
//
// A start that does not list a destination releases it the same way (reason "released"),
// counting from its cursor to the end of the log, or to where it went away when its cursor
// says so (cursor.go, version 2). Counting reads the records' frame headers, not their
// payloads.

// Released is a destination a start did not list, whose cursor it removed.
type Released struct {
	Destination string
	// Records is how many records it still owed, counted as dropped under reason
	// "released"; -1 when its cursor could not be read (it is not known where it stood).
	Records int
}

// ReleasedAtOpen returns the destinations Open released, with what each still owed. Safe for
// concurrent use.
func (s *Spool) ReleasedAtOpen() []Released { return s.releasedAtOpen }

// awayPos returns where the destination went away, 0 while it is here.
func (r *Reader) awayPos() Pos {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.awayAt
}

// releaseRemoved releases the removed destinations past their hold. Called with ckMu held.
func (s *Spool) releaseRemoved(now time.Time) error {
	s.mu.Lock()
	readers := s.mu.readers
	s.mu.Unlock()
	var gone []*Reader
	for _, r := range readers {
		why := s.releaseDue(r, now)
		if why == "" {
			continue
		}
		n := r.release()
		gone = append(gone, r)
		releasedCursors.Inc()
		if n > 0 {
			s.cfg.logger().Error("data lost: a removed destination's hold on the spool ended; the records it still owed are dropped",
				"destination", r.name, "records", n, "why", why)
		} else {
			s.cfg.logger().Info("a removed destination's hold on the spool was released", "destination", r.name, "why", why)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	// Which readers go is known without asking them: a reader's lock is never taken under
	// s.mu, since a reader takes s.mu under its own (Next reading the tail).
	s.mu.Lock()
	kept := make([]*Reader, 0, len(s.mu.readers))
	for _, r := range s.mu.readers {
		if !slices.Contains(gone, r) {
			kept = append(kept, r)
		}
	}
	s.mu.readers = kept
	s.mu.Unlock()
	var err error
	for _, r := range gone {
		if rerr := s.fs.Remove(s.path(cursorName(r.name))); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		if r.unanchored {
			r.unanchored = false
			s.unanchored.Add(-1)
		}
	}
	if s.cfg.Sync != SyncNone {
		// Without it a crash could bring a cursor back, and the start after count again what
		// the release counted.
		err = errors.Join(err, s.fs.SyncDir(s.cfg.Dir))
	}
	return err
}

// releaseDue says why r, removed, is to be released now, or "" if it is not.
func (s *Spool) releaseDue(r *Reader, now time.Time) string {
	r.mu.Lock()
	at, since := r.mu.awayAt, r.mu.awaySince
	r.mu.Unlock()
	if at == 0 {
		return ""
	}
	pos := r.Position()
	switch {
	case pos >= at:
		return "it owes nothing"
	case now.Sub(since) >= s.cfg.RemovedHold:
		return "held for -spool.removed-hold"
	}
	s.mu.Lock()
	var held int64
	for _, g := range s.mu.segs {
		if g.seq >= pos.Segment() {
			held += g.size
		}
	}
	s.mu.Unlock()
	if held > s.cfg.removedHoldBytes() {
		return "holds more than -spool.removed-hold-bytes"
	}
	return ""
}

func (r *Reader) releasedNow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.released
}

// release lets go of what r holds, counting as dropped (reason removed) what it still owed,
// and returns that count.
func (r *Reader) release() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.unfinishedLocked()
	n += r.s.countOwed(r.mu.next, r.mu.awayAt, r.handsOutLocked)
	r.mu.inflight, r.mu.head = r.mu.inflight[:0], 0
	r.mu.skip, r.mu.gaps = nil, nil
	r.mu.released = true
	r.closeFileLocked()
	r.dropped[dropRemoved].Add(float64(n))
	return n
}

// countOwed counts the records from from up to until (0: the end of the log) that handsOut
// accepts (nil: every one), by their frame headers.
func (s *Spool) countOwed(from, until Pos, handsOut func(Pos) bool) int {
	s.mu.Lock()
	var segs []segment
	for _, g := range s.mu.segs {
		if g.seq >= from.Segment() && (until == 0 || g.seq <= until.Segment()) {
			segs = append(segs, *g)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, g := range segs {
		off, end := int64(headerSize), g.size
		if g.seq == from.Segment() {
			off = max(off, from.Offset())
		}
		if until != 0 && g.seq == until.Segment() {
			end = min(end, until.Offset())
		}
		if off >= end {
			continue
		}
		f, err := s.fs.Open(s.path(segmentName(g.seq)), false)
		if err != nil {
			continue // gone meanwhile: drop-oldest counted what it took
		}
		n += countFrames(f, g.seq, off, end, handsOut)
		_ = f.Close()
	}
	return n
}
