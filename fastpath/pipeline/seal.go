package pipeline

import "time"

// Seal is the rule that ends a batch, which the pipeline's open batches and the spool feeder's
// batches share (-batch.max-bytes, -batch.max-items, -batch.max-age): a batch leaves once it
// holds MaxBytes or MaxItems, and at the latest MaxAge after its first request; a request that
// would take it past MaxBytes starts the next one. When a batch leaves short of its bounds
// (eagerly, when the destinations are idle) is each one's own: the pipeline's Eager and
// BatchMinGap, the feeder's destination holding none of its batches.
type Seal struct {
	MaxBytes int
	MaxItems int
	MaxAge   time.Duration
}

// Full reports whether a batch holding bytes and items leaves now.
func (s Seal) Full(bytes, items int) bool { return bytes >= s.MaxBytes || items >= s.MaxItems }

// Fits reports whether a batch may hold bytes and items: a request that would make it hold
// more goes to the next batch. The pipeline counts a request's items once it joined (Full
// seals the batch then); the feeder knows a record's items before, and counts them.
func (s Seal) Fits(bytes, items int) bool { return bytes <= s.MaxBytes && items <= s.MaxItems }

// Due returns how long after now a batch born at born (unix nanoseconds) reaches MaxAge; zero
// or less when it has.
func (s Seal) Due(born, now int64) time.Duration { return time.Duration(born + int64(s.MaxAge) - now) }
