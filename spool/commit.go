package spool

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	fsyncs = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_fsyncs_total",
		Help: "fdatasync calls on spool segments (commits, interval syncs, rotations).",
	})
	fsyncErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_fsync_errors_total",
		Help: "fdatasync calls on spool segments that failed; the appends they covered were refused.",
	})
	fsyncSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "otlpgate_spool_fsync_seconds",
		Help:    "Latency of fdatasync on spool segments.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14),
	})
	commitRecords = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "otlpgate_spool_commit_records",
		Help:    "Appends acknowledged by one group commit (-spool.sync=always).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
)

// timedSync syncs f and counts it.
func timedSync(f File) error {
	start := time.Now()
	err := f.Sync()
	fsyncSeconds.Observe(time.Since(start).Seconds())
	fsyncs.Inc()
	if err != nil {
		fsyncErrors.Inc()
	}
	return err
}

// committer runs group commits in SyncAlways mode. While one fdatasync runs, appends pile up
// as waiters; the next commit takes them all, so a burst of N appends costs about two syncs,
// not N. MaxCommitDelay lets a commit wait a little longer for company.
func (s *Spool) committer() {
	defer s.wg.Done()
	var timer *time.Timer
	if d := s.cfg.MaxCommitDelay; d > 0 {
		timer = time.NewTimer(d)
		timer.Stop()
	}
	for {
		select {
		case <-s.commitc:
		case <-s.done:
			return // Close syncs and answers what is left
		}
		if timer != nil {
			timer.Reset(s.cfg.MaxCommitDelay)
			select {
			case <-timer.C:
			case <-s.done:
				timer.Stop()
				return
			}
		}
		_ = s.sync()
	}
}

// sync makes everything written so far durable and answers the waiters it covers. The sync
// runs outside the lock, so appends continue meanwhile and wait for the next one.
func (s *Spool) sync() error {
	s.mu.Lock()
	_ = s.flushLocked() // a failure answered the appends it held; sync what was written before
	ref, target := s.mu.active, s.mu.written
	if ref == nil || target <= s.mu.synced {
		s.mu.Unlock()
		return nil
	}
	ref.acquire()
	ws := s.mu.waiters
	s.mu.waiters = s.mu.spare[:0]
	s.mu.syncing = true
	s.mu.Unlock()

	err := timedSync(ref.f)
	ref.release()
	if len(ws) > 0 {
		commitRecords.Observe(float64(len(ws)))
	}

	s.mu.Lock()
	s.mu.syncing = false
	s.syncDone.Broadcast()
	if ref != s.mu.active {
		panic("BUG: spool: the segment being synced was rotated meanwhile")
	}
	if err == nil {
		if target > s.mu.synced {
			s.mu.synced = target
		}
		if s.cfg.Sync == SyncAlways && uint64(s.mu.synced) > s.readable.Load() {
			s.readable.Store(uint64(s.mu.synced))
			s.notifyReadersLocked()
		}
	} else {
		s.syncFailedLocked(err)
	}
	s.releaseWaitersLocked(ws, err)
	s.mu.spare = ws[:0]
	s.mu.Unlock()
	return err
}

// syncFailedLocked handles a failed fdatasync of the active segment. After one, the kernel may
// have dropped the dirty pages and marked them clean, so that a later sync of the same file
// succeeds without them: nothing written to the segment since its last good sync can be
// trusted, and it is never synced again. The segment is sealed, and the next append opens a
// new one.
//
// SyncAlways: nothing past the last good sync was acknowledged (an append returns after the
// sync that covers it), so the segment is cut back there and every append waiting on it fails;
// the clients send those again. Nothing acknowledged is lost and the spool goes on.
//
// SyncInterval: the records written since the last good sync were acknowledged after write(2).
// Rewriting them elsewhere would need every one of them in memory, which the tail does not
// promise; so the spool fails instead, loudly: Err and Failed report it, every later Append
// fails, and the process is expected to stop. The records stay in the segment for the readers
// (they are still in the page cache, and each is checked against its CRC when read back), so
// what can still be delivered is; what the kernel dropped may be gone after a power loss.
func (s *Spool) syncFailedLocked(err error) {
	ref := s.mu.active
	g := s.mu.segs[len(s.mu.segs)-1]
	if s.cfg.Sync == SyncAlways {
		cut := s.mu.synced
		if cut.Segment() != ref.seq {
			cut = makePos(ref.seq, headerSize) // the header was synced at creation
		}
		s.releaseWaitersLocked(s.mu.waiters, err)
		s.mu.waiters = s.mu.waiters[:0]
		s.mu.unflushed = 0
		if t := &s.mu.tail; t.seq == ref.seq {
			t.buf = t.buf[:min(int64(len(t.buf)), max(cut.Offset()-t.off, 0))]
		}
		// Best effort: if the truncation fails, a restart may read refused records that the
		// disk kept anyway, a duplicate of the client's retry at worst.
		_ = ref.f.Truncate(cut.Offset())
		s.mu.bytes -= g.size - cut.Offset()
		curBytes.Store(s.mu.bytes)
		g.size = cut.Offset()
		s.mu.off = cut.Offset()
		s.mu.written = cut
	} else if s.mu.failed == nil {
		s.mu.failed = fmt.Errorf("%w: segment %s from offset %d: %w",
			ErrSyncFailed, segmentName(ref.seq), s.mu.synced.Offset(), err)
		close(s.failedc)
	}
	g.sealed = true
	s.mu.active = nil
	s.mu.broken = false
	ref.release()
}

// Failed is closed when the spool failed: a sync failed after records it should have covered
// were acknowledged (SyncInterval). Err then says which. Safe for concurrent use.
func (s *Spool) Failed() <-chan struct{} { return s.failedc }

// Err returns why the spool failed, wrapping ErrSyncFailed, or nil. Safe for concurrent use.
func (s *Spool) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

// housekeeper syncs in SyncInterval mode and runs checkpoints.
func (s *Spool) housekeeper() {
	defer s.wg.Done()
	ck := time.NewTicker(s.cfg.CheckpointInterval)
	defer ck.Stop()
	var syncc <-chan time.Time
	if s.cfg.Sync == SyncInterval {
		t := time.NewTicker(s.cfg.SyncInterval)
		defer t.Stop()
		syncc = t.C
	}
	for {
		select {
		case <-s.done:
			return
		case <-syncc:
			_ = s.sync()
			s.syncInheritedPending()
		case <-ck.C:
			_ = s.Checkpoint()
			s.syncInheritedPending()
		case <-s.housec:
			_ = s.Checkpoint()
		}
	}
}
