package kafkaconsume

import "testing"

// filled is an Admitter's Fill alone, for overShare.
type filled struct {
	Admitter
	used, limit int64
}

func (f filled) Fill() (int64, int64) { return f.used, f.limit }

// TestOverShare: the consumer waits when a record would take the queue past its share, never
// at an empty queue (a record larger than the share still goes), and never without a bound.
func TestOverShare(t *testing.T) {
	for _, tc := range []struct {
		used, limit, n int64
		share          float64
		want           bool
	}{
		{0, 1000, 400, 0.5, false},
		{100, 1000, 400, 0.5, false}, // 500 of 500
		{101, 1000, 400, 0.5, true},  // 501 past 500
		{0, 1000, 900, 0.5, false},   // larger than the share, at an empty queue
		{1, 1000, 900, 0.5, true},    // and behind anything
		{900, 1000, 100, 1, false},   // the whole queue
		{901, 1000, 100, 1, true},    // past it: the pipeline would refuse it anyway
		{5000, 0, 5000, 0.5, false},  // no bound
		{499, 1000, 0, 0.5, false},   // an empty request
		{600, 1000, 0, 0.5, true},    // above the share already
	} {
		c := &Consumer{cfg: Config{QueueShare: tc.share}, in: filled{used: tc.used, limit: tc.limit}}
		if got := c.overShare(tc.n); got != tc.want {
			t.Errorf("%d of %d queued, %d more, share %v: overShare %v, want %v", tc.used, tc.limit, tc.n, tc.share, got, tc.want)
		}
	}
}
