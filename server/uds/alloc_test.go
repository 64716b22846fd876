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

// TestTraceExportAllocs proves that a TRACE_EXPORT goes from the bytes of a read through the
// frame splitter, the span converter and its encoder to the data path without allocating, once
// a converter has seen an export of its size (the captured one: three spans with attributes,
// stack traces and a status).
func TestTraceExportAllocs(t *testing.T) {
	c, frame, spans := traceConn(t, "trace_export.bin")
	if spans != 3 {
		t.Fatalf("%d spans in the capture's last export, want 3", spans)
	}
	accepted := itemsCounters[0][consumeAccepted]
	before, dropped := counter(accepted), counter(spansDropped)
	c.feed(frame) // warm-up: the converter's slices and arena grow to the export's size
	allocs := testing.AllocsPerRun(1000, func() {
		c.feed(frame)
		c.noteRead(1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per TRACE_EXPORT", allocs)
	}
	// The warm-up, the run AllocsPerRun adds and 1000 measured runs, every span handed over.
	if got := counter(accepted) - before; got != 1002*3 {
		t.Fatalf("%v spans accepted, want %d", got, 1002*3)
	}
	if counter(spansDropped) != dropped {
		t.Fatal("spans dropped")
	}
}
