package client

import "sync/atomic"

// Tally adds up the items a set of destinations delivered and dropped, by reason, for as long
// as it is given to them (Config.Tally): what the gateway's stop line reports, whatever
// destinations came and went meanwhile. The metrics count the same per destination, but a
// metric lives as long as the process and its series are shared by every destination of one
// name, so they cannot say what one run of one gateway did. Safe for concurrent use.
type Tally struct {
	delivered atomic.Int64
	dropped   [numDropReasons]atomic.Int64
	returned  atomic.Int64
}

// Delivered returns the items an upstream acknowledged. Safe for concurrent use.
func (t *Tally) Delivered() int64 { return t.delivered.Load() }

// Returned returns the items stopping destinations gave back to the spool undelivered, which
// are not dropped (otlpgate_client_returned_to_spool_items_total). Safe for concurrent use.
func (t *Tally) Returned() int64 { return t.returned.Load() }

// Dropped returns the items dropped for reason. Safe for concurrent use.
func (t *Tally) Dropped(reason DropReason) int64 {
	if reason >= numDropReasons {
		return 0
	}
	return t.dropped[reason].Load()
}

// DropReasons lists every reason, in the order of their values.
func DropReasons() []DropReason {
	out := make([]DropReason, numDropReasons)
	for i := range out {
		out[i] = DropReason(i)
	}
	return out
}

// Unanswered reports whether r counts requests the upstream may have taken: sent, and not
// answered before Shutdown gave up (shutdown_pending).
func (r DropReason) Unanswered() bool { return r == DropShutdownPending }
