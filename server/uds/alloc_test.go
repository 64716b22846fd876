//go:build !race

package uds

import "testing"

// TestStatsRecordAllocs proves that a STATS_RECORD goes from the bytes of a read through the
// frame splitter, the payload decoder and the registry into every view's aggregate (count, sum,
// distribution, last value, with tags and attachments) without allocating, once its series
// exist, timeout bookkeeping included.
func TestStatsRecordAllocs(t *testing.T) {
	c, record := statsConn(t)
	// noteRead is what OnTraffic adds when timeouts are on.
	allocs := testing.AllocsPerRun(1000, func() {
		c.feed(record)
		c.noteRead(1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per STATS_RECORD", allocs)
	}
	// The record really was aggregated each time: the capture's own, statsConn's, the warm-up
	// run and 1000 measured runs.
	v := c.proc.mu.views["example.com/requests_count"]
	for _, s := range v.mu.series {
		if s.count != 1003 {
			t.Fatalf("count %d, want 1003", s.count)
		}
	}
}
