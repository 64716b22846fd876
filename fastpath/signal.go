package fastpath

import (
	"errors"
	"fmt"
	"strings"
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
