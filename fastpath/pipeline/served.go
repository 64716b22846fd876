package pipeline

import (
	"errors"
	"sync/atomic"

	"github.com/otlpgate/otlpgate/fastpath"
)

// SignalSelector is implemented by a Destination that takes only some signals: the pipeline
// hands it only batches of those, a spool feeder passes over records of the others, and
// admission refuses a request of a signal no destination takes (ErrUnserved). A Destination
// that does not implement it takes every signal.
type SignalSelector interface {
	Signals() fastpath.SignalSet
}

// SignalsOf is what d takes: its Signals, every signal when it does not say.
func SignalsOf(d Destination) fastpath.SignalSet {
	if s, ok := d.(SignalSelector); ok && s.Signals() != 0 {
		return s.Signals()
	}
	return fastpath.AllSignals
}

// ErrUnserved refuses a request of a signal no destination takes (of its tenant's, with
// match-header): the configuration has no place for it, so a retry would meet the same
// answer. The intakes answer it as not served (gRPC UNIMPLEMENTED, HTTP 404), which OTLP
// exporters do not retry.
var ErrUnserved = errors.New("fastpath: no destination takes this signal (-dest signals=)")

// Served is the destinations that take each signal (bit i: destination i of the set, the
// last bit standing for every destination past 63). A pipeline and the spool's admission
// keep one, replaced with their destinations. Safe for concurrent use.
type Served struct {
	set  atomic.Bool
	mask [fastpath.NumSignals]atomic.Uint64
}

// Set records what dests take.
func (s *Served) Set(dests []Destination) {
	m := servedBy(dests)
	for sig := range m {
		s.mask[sig].Store(m[sig])
	}
	s.set.Store(true)
}

// servedBy is, by signal, the destinations of dests that take it (bit i: dests[i], the last
// bit standing for every destination past 63).
func servedBy(dests []Destination) (m [fastpath.NumSignals]uint64) {
	for i, d := range dests {
		ds := SignalsOf(d)
		for sig := range fastpath.NumSignals {
			if ds.Has(sig) {
				m[sig] |= 1 << min(i, 63)
			}
		}
	}
	return m
}

// of is the destinations that take sig, every one before Set.
func (s *Served) of(sig fastpath.Signal) uint64 {
	if s == nil || !s.set.Load() {
		return ^uint64(0)
	}
	return s.mask[sig].Load()
}
