package spool

import (
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
	s.mu.Unlock()

	err := timedSync(ref.f)
	ref.release()
	if len(ws) > 0 {
		commitRecords.Observe(float64(len(ws)))
	}

	s.mu.Lock()
	if err == nil {
		if target > s.mu.synced {
			s.mu.synced = target
		}
		if s.cfg.Sync == SyncAlways && uint64(s.mu.synced) > s.readable.Load() {
			s.readable.Store(uint64(s.mu.synced))
			s.notifyReadersLocked()
		}
	} else if ref == s.mu.active {
		// After a failed fdatasync the kernel may have dropped the dirty pages, and a later
		// sync could succeed without them: never trust this segment again.
		s.mu.broken = true
	}
	s.releaseWaitersLocked(ws, err)
	s.mu.spare = ws[:0]
	s.mu.Unlock()
	return err
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
		case <-ck.C:
			_ = s.Checkpoint()
		case <-s.housec:
			_ = s.Checkpoint()
		}
	}
}
