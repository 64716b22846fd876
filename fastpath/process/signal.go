package process

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

var errSignal = errors.New("process: unknown signal")

// Tally is what the steps did to a request (pipeline.Tally), a count per slot named below:
// tRemoved is read by the pipeline, the rest only here. It is counted in the metrics by
// Commit, once the request is admitted. A new step that counts something adds a slot here.
type Tally = pipeline.Tally

// The slots of a Tally: what each counts.
const (
	tRemoved           = pipeline.TallyRemoved + iota // items the request lost (the pipeline reads it)
	tDroppedItems                                     // items of the entries -drop left out
	tDroppedResources                                 // entries -drop left out
	tSampledOut                                       // spans sampling left out
	tSampledKept                                      // spans sampling kept
	tEdited                                           // Resources the edits rewrote
	tTracestateOmitted                                // values sampling left out of kept spans' tracestates to make room
	numSlots
)

// A Tally has room for every slot: with a slot past pipeline.NumTallySlots this package does
// not build.
var _ [pipeline.NumTallySlots - numSlots]struct{}
