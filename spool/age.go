package spool

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// How old the oldest unfinished record is: how long the slowest destination has been behind.
//
// Records carry no time on disk, and the segment format stays as it is: the spool keeps, in
// memory, a sparse index of when records were appended (ageMarks): a mark names the first
// record appended in a new second of the spool's life, so the record at any position was
// appended within a second after the last mark at or before it. Records recovered at Open
// were appended by an earlier process whose clock is gone: they count from Open, so after a
// restart the age of a backlog starts again from the start and understates by the downtime
// and by how long the backlog was held before it.
//
// The index grows by one mark per second of appending while some destination holds the
// records it names: marks below every destination's position are trimmed at each checkpoint,
// and past maxAgeMarks every other mark is dropped, which bounds it to 1 MiB and coarsens the
// age of the oldest records (to within the gap between the marks left) rather than growing.

// ageResolution is the spacing of the marks: the age is exact to within it.
const ageResolution = time.Second

// maxAgeMarks bounds the index (16 bytes a mark).
const maxAgeMarks = 1 << 16

// ageMark says that the record at pos, and the ones after it up to the next mark, were
// appended at (nanoseconds since Open, monotonic) or within ageResolution after.
type ageMark struct {
	pos Pos
	at  int64
}

// The gauge reads the spool opened last, as the other gauges do (spool.go).
var ageSpool atomic.Pointer[Spool]

var _ = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "otlpgate_spool_oldest_unfinished_age_seconds",
	Help: "Age of the oldest spooled record that some destination has not finished (delivered or dropped): how far behind the slowest destination is; 0 when every destination caught up. Records recovered at start count from the start.",
}, func() float64 {
	if s := ageSpool.Load(); s != nil {
		return s.OldestUnfinishedAge(time.Now()).Seconds()
	}
	return 0
})

// initAgeLocked starts the index: every record recovered at Open counts from now.
func (s *Spool) initAgeLocked() {
	s.opened = time.Now()
	s.mu.ages = append(s.mu.ages[:0], ageMark{pos: 0, at: 0})
}

// markAgeLocked notes that the record at pos is being appended now, when the last mark is
// older than ageResolution. Called by Append with mu held.
func (s *Spool) markAgeLocked(pos Pos) {
	now := int64(time.Since(s.opened))
	if n := len(s.mu.ages); n > 0 && now-s.mu.ages[n-1].at < int64(ageResolution) {
		return
	}
	if len(s.mu.ages) >= maxAgeMarks {
		// Keep the first (it covers the oldest records) and every other one after it.
		kept := s.mu.ages[:1]
		for i := 2; i < len(s.mu.ages); i += 2 {
			kept = append(kept, s.mu.ages[i])
		}
		clear(s.mu.ages[len(kept):])
		s.mu.ages = kept
	}
	s.mu.ages = append(s.mu.ages, ageMark{pos: pos, at: now})
}

// trimAgesLocked drops the marks that only name records below low, every destination's
// position: no record they name is unfinished. The last mark at or below low stays, since it
// dates the record at low. Called with mu held.
func (s *Spool) trimAgesLocked(low Pos) {
	i := s.ageIndexLocked(low)
	if i > 0 {
		n := copy(s.mu.ages, s.mu.ages[i:])
		clear(s.mu.ages[n:])
		s.mu.ages = s.mu.ages[:n]
	}
}

// ageIndexLocked returns the index of the last mark at or below p (0 if none is).
func (s *Spool) ageIndexLocked(p Pos) int {
	i, found := slices.BinarySearchFunc(s.mu.ages, p, func(m ageMark, p Pos) int {
		switch {
		case m.pos < p:
			return -1
		case m.pos > p:
			return 1
		}
		return 0
	})
	if !found && i > 0 {
		i--
	}
	return i
}

// OldestUnfinishedAge returns how long ago, at now, the oldest record that some destination
// has not finished was appended (to within a second; records recovered at Open count from
// Open), or 0 when every destination finished every readable record. Safe for concurrent use.
func (s *Spool) OldestUnfinishedAge(now time.Time) time.Duration {
	limit := Pos(s.readable.Load())
	s.mu.Lock()
	defer s.mu.Unlock()
	low, behind := limit, false
	for _, r := range s.mu.readers {
		if p := r.Position(); p < low {
			low, behind = p, true
		}
	}
	if behind {
		low = s.firstRecordLocked(low)
	}
	if !behind || low >= limit || len(s.mu.ages) == 0 {
		return 0
	}
	at := s.mu.ages[s.ageIndexLocked(low)].at
	return max(0, now.Sub(s.opened)-time.Duration(at))
}

// firstRecordLocked returns where the first record at or after p may lie: p itself when its
// segment holds bytes past it, else the start of the next segment that holds any record. A
// position may point where nothing is: a start that deleted the last (finished) segment leaves
// the cursors at its end, below the tail of every later start, with no record in between; such
// a destination is behind on nothing. Called with mu held.
func (s *Spool) firstRecordLocked(p Pos) Pos {
	for _, g := range s.mu.segs {
		switch {
		case g.seq < p.Segment():
		case g.seq == p.Segment() && p.Offset() < g.size:
			return p
		case g.seq > p.Segment() && g.size > headerSize:
			return makePos(g.seq, headerSize)
		}
	}
	return Pos(s.readable.Load())
}
