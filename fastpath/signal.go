package fastpath

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
