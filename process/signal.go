package process

import "errors"

// Signals, numbered as fastpath numbers them (fastpath.Signal): the hook passes the number,
// since this package may not import fastpath. TestSignalNumbers holds the two together.
const (
	sigTraces = iota
	sigMetrics
	sigLogs
	numSignals
)

var signalNames = [numSignals]string{"traces", "metrics", "logs"}

var errSignal = errors.New("process: unknown signal")
