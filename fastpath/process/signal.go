package process

import (
	"errors"

)

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

// Tally is what the steps did to a request (pipeline.Tally, an unnamed type both name): slot
// tRemoved is read by fastpath, the rest only here. It is counted in the metrics by Commit,
// once the request is admitted.
type Tally = [8]int64

const (
	tRemoved           = iota // items the request lost
	tDroppedItems             // items of the entries -drop left out
	tDroppedResources         // entries -drop left out
	tSampledOut               // spans sampling left out
	tSampledKept              // spans sampling kept
	tEdited                   // Resources the edits rewrote
	tTracestateOmitted        // values sampling left out of kept spans' tracestates to make room
)
