package client

import (
	"sync/atomic"
)

// lifecycle is where a Dest is in its life. It only ever moves forward, one documented step
// at a time; each step is taken by one method, with a compare-and-swap, so that two callers
// racing for the same step (Start against Shutdown, Shutdown against Handover) see one winner:
//
//	created  --Start-------------------------------------------> running
//	created, running --Shutdown, Handover----------------------> draining
//	draining --the wait ends (drained, or ctx done)------------> stopping
//	stopping --every goroutine returned, leftovers finished----> stopped
//
// What each state means:
//
//   - created: built by New; Enqueue queues, nothing is sent.
//   - running: senders run; Enqueue queues.
//   - draining: Enqueue refuses (pipeline.ErrClosed); senders still send, retry and re-send
//     while Shutdown waits for the upstream's answers (WaitOnShutdown), or Handover for the
//     requests already sent. The step is taken under q.mu, so that no Enqueue that saw an
//     earlier state can still be queueing once Shutdown looks at what is outstanding.
//   - stopping: d.stop is closed and d.ctx cancelled; a failure now is a loss (counted under a
//     shutdown_* reason, or handed back by Handover), never a retry.
//   - stopped: Shutdown or Handover has finished everything it found; the connection is closed.
type lifecycle uint32

const (
	stateCreated lifecycle = iota
	stateRunning
	stateDraining
	stateStopping
	stateStopped
)

var lifecycleNames = [...]string{"created", "running", "draining", "stopping", "stopped"}

func (s lifecycle) String() string {
	if int(s) < len(lifecycleNames) {
		return lifecycleNames[s]
	}
	return "unknown"
}

// lifecycleState holds a lifecycle; the zero value is stateCreated.
type lifecycleState struct{ v atomic.Uint32 }

// load returns the current state. Safe for concurrent use.
func (l *lifecycleState) load() lifecycle { return lifecycle(l.v.Load()) }

// move takes the step from the current state to to, when the current state is one of from,
// and returns the state it left. ok is false, and nothing changes, when the current state is
// not one of from. Safe for concurrent use.
func (l *lifecycleState) move(to lifecycle, from ...lifecycle) (prev lifecycle, ok bool) {
	for {
		cur := lifecycle(l.v.Load())
		allowed := false
		for _, f := range from {
			allowed = allowed || f == cur
		}
		if !allowed {
			return cur, false
		}
		if l.v.CompareAndSwap(uint32(cur), uint32(to)) {
			return cur, true
		}
	}
}

// Shorthands for the questions the senders ask.

// closing reports whether Shutdown or Handover began (draining or later).
func (d *Dest) closing() bool { return d.state.load() >= stateDraining }

// stopping reports whether Shutdown or Handover stopped waiting (stopping or later): a failure
// is then a loss, not a retry.
func (d *Dest) stopping() bool { return d.state.load() >= stateStopping }
