package spool

// An Append that finds the spool full frees what every destination finished before it gives
// up (reclaim): the checkpoint would free it too, but only up to CheckpointInterval later, and a
// client refused meanwhile sees backpressure although every destination caught up.
//
// reclaim runs on the appending goroutine (an intake's, which waits for the answer anyway),
// once per Append, with no lock held: Append lets go of mu first, because holdLow takes each
// reader's lock (a reader's lock comes before mu) and the unlinks must not stall the appends
// and reads that wait for mu. It does not take ckMu, so it never waits behind a checkpoint's
// cursor writes and syncs; its cost is bounded by one unlink per segment freed, and no fsync.
// The interleavings:
//  1. A checkpoint, or other appends, free at the same time: deleteFinished takes the segments
//     off mu.segs under mu, so each is accounted and removed by exactly one of them.
//  2. Drop-oldest holds mu over its whole loop: it never sees a segment half freed, and
//     whichever runs second finds the segments the other took gone.
//  3. A reader added meanwhile (AddReader) starts at readable, at or above every position
//     holdLow read, so nothing it will read lies in a segment freed here.
//  4. A removed destination that comes back meanwhile (Back): see holdLow.
//  5. Between reclaim and the second look under mu, other appends may take what was freed;
//     the Append is then refused (or drops the oldest) as before.

// reclaim deletes the sealed segments every destination finished, as a checkpoint does before
// it persists positions, and counts a failed removal as a failed checkpoint.
func (s *Spool) reclaim() {
	s.mu.Lock()
	readers := s.mu.readers
	s.mu.Unlock()
	if err := s.freeFinished(readers); err != nil {
		checkpointErrors.Inc()
	}
}

// freeFinished deletes the sealed segments below every position that holds the spool
// (holdLow) and forgets when their records were appended (age.go).
func (s *Spool) freeFinished(readers []*Reader) error {
	low := holdLow(readers)
	err := s.deleteFinished(low)
	if len(readers) > 0 {
		s.mu.Lock()
		s.trimAgesLocked(low)
		s.mu.Unlock()
	}
	return err
}

// holdLow returns the lowest position the spool must keep records from for readers: the least
// of their positions, but for a released reader's and for that of a removed destination that
// owes nothing (it finished every record appended before it went away; what follows is not
// its own), which the next checkpoint releases. Called with no lock held.
//
// The positions of the destinations that are here are read first, so that one that comes back
// (Back) after it was passed over cannot lose a record appended after its return: those lie at
// or above readable at its return, which is at or above every position read before, and so
// above every segment freed below them. One that comes back before it is looked at is here,
// and holds by its position.
func holdLow(readers []*Reader) Pos {
	low := Pos(^uint64(0))
	for _, r := range readers {
		if r.awayPos() == 0 {
			low = min(low, r.Position())
		}
	}
	for _, r := range readers {
		r.mu.Lock()
		at, released := r.mu.awayAt, r.mu.released
		p := r.Position()
		r.mu.Unlock()
		if released || (at != 0 && p >= at) {
			continue
		}
		low = min(low, p)
	}
	return low
}
