package fastpath

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// Signal is the kind of telemetry a payload carries.
type Signal uint8

const (
	Traces Signal = iota
	Metrics
	Logs
	// NumSignals is the number of signals: arrays indexed by Signal have this length.
	NumSignals
)

// String returns the signal's lower-case name, as used in metric labels and logs.
func (s Signal) String() string {
	switch s {
	case Traces:
		return "traces"
	case Metrics:
		return "metrics"
	case Logs:
		return "logs"
	}
	return "unknown"
}

// SignalSet is a set of signals, bit 1<<Signal for each: the signals a destination takes
// (a -dest's signals=). The zero value is every signal, so that a destination that says
// nothing takes everything.
type SignalSet uint8

// AllSignals is the set of every signal.
const AllSignals SignalSet = 1<<NumSignals - 1

// Has reports whether s holds sig. The zero set holds every signal.
func (s SignalSet) Has(sig Signal) bool { return s == 0 || s&(1<<sig) != 0 }

// String lists the set's signals, comma-separated, in Signal order.
func (s SignalSet) String() string {
	if s == 0 {
		s = AllSignals
	}
	out := ""
	for sig := range NumSignals {
		if s&(1<<sig) != 0 {
			if out != "" {
				out += ","
			}
			out += sig.String()
		}
	}
	return out
}

// ParseSignals reads a list of signal names (traces, metrics, logs) separated by commas or
// '|'. An unknown name or an empty list is an error naming what it expects.
func ParseSignals(v string) (SignalSet, error) {
	var s SignalSet
	for _, name := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '|' }) {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "traces":
			s |= 1 << Traces
		case "metrics":
			s |= 1 << Metrics
		case "logs":
			s |= 1 << Logs
		case "":
		default:
			return 0, fmt.Errorf("unknown signal %q: want traces, metrics or logs", strings.TrimSpace(name))
		}
	}
	if s == 0 {
		return 0, errors.New("no signal: want one or more of traces, metrics, logs")
	}
	return s, nil
}

// SignalSelector is implemented by a Destination that takes only some signals: the pipeline
// hands it only batches of those, a spool feeder passes over records of the others, and
// admission refuses a request of a signal no destination takes (ErrUnserved). A Destination
// that does not implement it takes every signal.
type SignalSelector interface {
	Signals() SignalSet
}

// signalsOf is what d takes.
func signalsOf(d Destination) SignalSet {
	if s, ok := d.(SignalSelector); ok && s.Signals() != 0 {
		return s.Signals()
	}
	return AllSignals
}

// SignalsOf is what d takes: its Signals, every signal when it does not say.
func SignalsOf(d Destination) SignalSet { return signalsOf(d) }

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
	mask [NumSignals]atomic.Uint64
}

// Set records what dests take.
func (s *Served) Set(dests []Destination) {
	var m [NumSignals]uint64
	for i, d := range dests {
		ds := signalsOf(d)
		for sig := range NumSignals {
			if ds.Has(sig) {
				m[sig] |= 1 << min(i, 63)
			}
		}
	}
	for sig := range m {
		s.mask[sig].Store(m[sig])
	}
	s.set.Store(true)
}

// of is the destinations that take sig, every one before Set.
func (s *Served) of(sig Signal) uint64 {
	if s == nil || !s.set.Load() {
		return ^uint64(0)
	}
	return s.mask[sig].Load()
}
