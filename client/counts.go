package client

import "github.com/prometheus/client_golang/prometheus"

// Counts is how a destination that is not an upstream (the file, client/filedest) counts what
// it delivers and drops under the series an upstream's are counted in, labelled by its name:
// the status page, /status.json, the dashboards and the alert rules read these series, so it
// is shown and alerted on like any destination. Safe for concurrent use.
type Counts struct {
	sent, sentBytes, ackedReqs, ackedItems prometheus.Counter
	droppedReqs, droppedItems              *prometheus.CounterVec
}

// NewCounts returns the counters of the destination name. Its delivered series exist from
// now on, at 0, so that the destination is listed before it wrote anything.
func NewCounts(name string) *Counts {
	l := prometheus.Labels{"destination": name, "backend": ""}
	return &Counts{
		sent: sentRequests.With(l), sentBytes: sentBytes.With(l),
		ackedReqs: ackedRequests.With(l), ackedItems: ackedItems.With(l),
		droppedReqs: droppedRequests.MustCurryWith(l), droppedItems: droppedItems.MustCurryWith(l),
	}
}

// Delivered counts a batch of items and bytes written and acknowledged.
func (c *Counts) Delivered(items, bytes int) {
	c.sent.Inc()
	c.sentBytes.Add(float64(bytes))
	c.ackedReqs.Inc()
	c.ackedItems.Add(float64(items))
}

// Dropped counts a batch of items given up on for reason (a label value of
// otlpgate_client_dropped_items_total).
func (c *Counts) Dropped(reason string, items int) {
	c.droppedReqs.WithLabelValues(reason).Inc()
	c.droppedItems.WithLabelValues(reason).Add(float64(items))
}
