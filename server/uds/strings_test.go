package uds

import (
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
)

// Strings the intake keeps between exports are capped in bytes: a measure, a view or a record
// with one longer than -uds.max-string-bytes is refused and counted, and what fits is
// aggregated as before.
func TestStringCap(t *testing.T) {
	long := strings.Repeat("x", 65)
	tooLong := counter(statsRejected[rejectTooLong])
	noMeasure := counter(statsRejected[rejectUnknownMeasure])

	records := counter(messagesByType[ocdaemon.StatsRecord])
	h := start(t, func(c *Config) { c.MaxStringBytes = 64 })
	c := h.dial()
	s := newStream(5).init().measure("m", ocdaemon.MeasureInt).view("m_sum", "m", ocdaemon.AggregationSum, "k").
		// A measure with a long description, a view with a long tag key: refused.
		add(ocdaemon.MeasureCreate, ocdaemon.AppendMeasure(nil, &ocdaemon.Measure{Type: ocdaemon.MeasureInt, Name: []byte("big"), Description: []byte(long)})).
		view("big_sum", "m", ocdaemon.AggregationSum, long).
		// A record with a long tag value: refused whole; a short one: aggregated.
		recordInt("m", 1000, "k", long).
		recordInt("m", 7, "k", "v").
		// The refused measure does not exist.
		recordInt("big", 1)
	write(t, c, s.buf, 0)
	// Every message handled before the shutdown's final export: the three records last.
	waitMessages(t, ocdaemon.StatsRecord, records, 3)
	c.Close()
	h.shutdown()

	if d := counter(statsRejected[rejectTooLong]) - tooLong; d != 3 {
		t.Errorf("too_long: %v, want 3 (measure, view, record)", d)
	}
	if d := counter(statsRejected[rejectUnknownMeasure]) - noMeasure; d != 1 {
		t.Errorf("unknown_measure: %v, want 1 (the refused measure)", d)
	}
	got := metricPoints(t, h.rec.Received())
	if pts := got["5 m_sum {k=v}"]; len(pts) != 1 || pts[0].value != 7 {
		t.Errorf("m_sum: %v, want one point of 7 (all: %v)", pts, got)
	}
	for k := range got {
		if strings.Contains(k, "big") || strings.Contains(k, long) {
			t.Errorf("refused definition exported: %s", k)
		}
	}
}
