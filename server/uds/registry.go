package uds

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runtimeInfo is what a PHP process says about itself in REQ_INIT.
type runtimeInfo struct {
	php  string
	zend string
}

// registry holds the stats state of every PHP process, keyed by pid, and the export schedule.
//
// Invariants:
//  1. A process is in mu.procs while at least one connection is attached to it and it did not
//     send PROC_SHUTDOWN; then it moves to mu.ended, which the exporter drains with a final
//     export. A final export the data path refuses for want of room puts the process back in
//     mu.ended (keep), at most maxProcesses of them: it is forgotten only once admitted.
//  2. A connection holds at most one attachment (conn.proc) and releases it exactly once.
//  3. Lock order: registry.mu, then process.mu, then view.mu.
type registry struct {
	maxProcesses  int
	defaultPeriod time.Duration
	wake          func() // nudges the exporter; never blocks

	mu struct {
		sync.Mutex
		procs map[uint64]*process
		ended []*process
	}
}

func newRegistry(maxProcesses int, defaultPeriod time.Duration, wake func()) *registry {
	r := &registry{maxProcesses: maxProcesses, defaultPeriod: defaultPeriod, wake: wake}
	r.mu.procs = make(map[uint64]*process)
	return r
}

// attach returns the live process of pid, creating it, and counts the caller as one of its
// connections. It returns nil when the process limit is reached. Safe for concurrent use.
func (r *registry) attach(pid uint64, now time.Time, limits processLimits) *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.mu.procs[pid]
	if p == nil {
		if len(r.mu.procs) >= r.maxProcesses {
			return nil
		}
		p = newProcess(pid, limits)
		p.sched.period = r.defaultPeriod
		p.sched.next = now.Add(r.defaultPeriod)
		r.mu.procs[pid] = p
	}
	p.sched.conns++
	return p
}

// detach releases one connection's attachment; the last one ends the process. Safe for
// concurrent use.
func (r *registry) detach(p *process) {
	r.mu.Lock()
	p.sched.conns--
	ended := p.sched.conns == 0 && r.endLocked(p)
	r.mu.Unlock()
	if ended {
		r.wake()
	}
}

// end ends p at once (PROC_SHUTDOWN). Connections still attached notice p.ended and attach to a
// fresh process on their next message. Safe for concurrent use.
func (r *registry) end(p *process) {
	r.mu.Lock()
	ended := r.endLocked(p)
	r.mu.Unlock()
	if ended {
		r.wake()
	}
}

func (r *registry) endLocked(p *process) bool {
	if p.ended.Load() {
		return false
	}
	p.ended.Store(true)
	if r.mu.procs[p.pid] == p {
		delete(r.mu.procs, p.pid)
	}
	r.mu.ended = append(r.mu.ended, p)
	return true
}

// setPeriod changes p's reporting period; the next export is one new period after the last.
// Safe for concurrent use.
func (r *registry) setPeriod(p *process, d time.Duration) {
	r.mu.Lock()
	changed := d != p.sched.period
	if changed {
		p.sched.next = p.sched.next.Add(d - p.sched.period)
		p.sched.period = d
	}
	r.mu.Unlock()
	if changed {
		r.wake()
	}
}

// due returns the processes to export at now (all of them with all set) ordered by pid, and
// the next deadline (zero when no process is live). Ended processes are always due, and leave
// the registry. Safe for concurrent use.
func (r *registry) due(now time.Time, all bool) (due []*process, next time.Time) {
	r.mu.Lock()
	for _, p := range r.mu.procs {
		if all || !now.Before(p.sched.next) {
			due = append(due, p)
			// Skip missed periods instead of bursting to catch up.
			for !p.sched.next.After(now) {
				p.sched.next = p.sched.next.Add(p.sched.period)
			}
		}
		if next.IsZero() || p.sched.next.Before(next) {
			next = p.sched.next
		}
	}
	due = append(due, r.mu.ended...)
	r.mu.ended = nil
	r.mu.Unlock()
	slices.SortFunc(due, func(a, b *process) int {
		switch {
		case a.pid < b.pid:
			return -1
		case a.pid > b.pid:
			return 1
		}
		return 0
	})
	return due, next
}

// keep puts ended processes whose final export was refused back, to be exported again with the
// next round. Beyond maxProcesses waiting, the oldest are given up and returned. Safe for
// concurrent use.
func (r *registry) keep(procs []*process) (dropped []*process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.ended = append(r.mu.ended, procs...)
	if extra := len(r.mu.ended) - r.maxProcesses; extra > 0 {
		dropped = slices.Clone(r.mu.ended[:extra])
		r.mu.ended = slices.Delete(r.mu.ended, 0, extra)
	}
	return dropped
}

// recountSeries sets the series budget to the series every process the registry knows holds,
// live or ended and waiting for its final export, retired views included. Processes whose final
// export was admitted are gone from the registry, and their series leave the count here. The
// count can miss a series created while it runs, which the next recount finds. Safe for
// concurrent use; not on the hot path (the exporter calls it once a round).
func (r *registry) recountSeries(b *seriesBudget) {
	r.mu.Lock()
	procs := make([]*process, 0, len(r.mu.procs)+len(r.mu.ended))
	for _, p := range r.mu.procs {
		procs = append(procs, p)
	}
	procs = append(procs, r.mu.ended...)
	r.mu.Unlock()
	n := 0
	for _, p := range procs {
		p.mu.RLock()
		for _, v := range p.mu.views {
			n += v.seriesCount()
		}
		for _, v := range p.mu.retired {
			n += v.seriesCount()
		}
		p.mu.RUnlock()
	}
	b.n.Store(int64(n))
}

// live returns the number of live processes. Safe for concurrent use.
func (r *registry) live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.procs)
}

// processLimits caps the definitions of one process.
type processLimits struct {
	maxMeasures int
	maxViews    int
	maxSeries   int
	maxString   int           // longest string kept (Config.MaxStringBytes); 0: no cap
	budget      *seriesBudget // the server's cap on series across processes
}

// process is the stats state of one PHP process: its measures, its views and their aggregates.
type process struct {
	pid    uint64
	limits processLimits
	ended  atomic.Bool

	// sched is guarded by registry.mu.
	sched struct {
		period time.Duration
		next   time.Time
		conns  int
	}

	mu struct {
		sync.RWMutex
		measures map[string]*measure
		views    map[string]*view
		// retired views were unregistered and get one final export.
		retired []*view
		runtime runtimeInfo
	}
}

func newProcess(pid uint64, limits processLimits) *process {
	p := &process{pid: pid, limits: limits}
	p.mu.measures = make(map[string]*measure)
	p.mu.views = make(map[string]*view)
	return p
}

// restoreRetired gives p back the retired views an export took, when the export was refused:
// their final report is then part of the next one.
func (p *process) restoreRetired(views []*view) {
	if len(views) == 0 {
		return
	}
	p.mu.Lock()
	p.mu.retired = append(views, p.mu.retired...)
	p.mu.Unlock()
}

func (p *process) setRuntime(rt runtimeInfo) {
	p.mu.Lock()
	p.mu.runtime = rt
	p.mu.Unlock()
}
