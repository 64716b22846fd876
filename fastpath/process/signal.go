package process

import (
	"errors"
)

var errSignal = errors.New("process: unknown signal")

// Tally is what the steps did to a request (pipeline.Tally, an unnamed type both name, so
// that neither package imports the other): slot tRemoved is read by the pipeline, the rest
// only here. It is counted in the metrics by Commit, once the request is admitted.
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
