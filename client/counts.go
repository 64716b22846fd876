package client

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Counts is how a destination that is not an upstream (the file, client/filedest) counts what
// it delivers and drops under the series an upstream's are counted in, labelled by its name:
// the status page, /status.json, the dashboards and the alert rules read these series, so it
// is shown and alerted on like any destination. Safe for concurrent use.
type Counts struct {
	name                                   string
	sent, sentBytes, ackedReqs, ackedItems prometheus.Counter
	droppedReqs, droppedItems              *prometheus.CounterVec
	retried                                [numRetryReasons]prometheus.Counter
	returnedReqs, returnedItems            prometheus.Counter
}

// NewCounts returns the counters of the destination name. Its delivered series exist from
// now on, at 0, so that the destination is listed before it wrote anything.
func NewCounts(name string) *Counts {
	l := prometheus.Labels{"destination": name, "backend": ""}
	c := &Counts{name: name,
		sent: sentRequests.With(l), sentBytes: sentBytes.With(l),
		ackedReqs: ackedRequests.With(l), ackedItems: ackedItems.With(l),
		droppedReqs: droppedRequests.MustCurryWith(l), droppedItems: droppedItems.MustCurryWith(l),
		returnedReqs: returnedRequests.With(l), returnedItems: returnedItems.With(l),
	}
	for r := range c.retried {
		c.retried[r] = retriedRequests.WithLabelValues(name, "", RetryReason(r).String())
	}
	return c
}

// Retried counts a request scheduled to be sent again after a backoff, for reason.
func (c *Counts) Retried(reason RetryReason) { c.retried[reason].Inc() }

// Returned counts a batch of items a stopping destination did not deliver and the spool keeps
// for the next start or the replacement (pipeline.Batch.Kept): not a loss.
func (c *Counts) Returned(items int) {
	c.returnedReqs.Inc()
	c.returnedItems.Add(float64(items))
}

// Hold reports held (bytes the destination holds: queued, in flight, waiting for a retry) and
// sending (requests in flight) as the destination's otlpgate_client_queue_bytes and
// otlpgate_client_in_flight_requests, which the status page reads to tell a destination that
// holds data and delivers none (down), until the returned function is called.
func (c *Counts) Hold(held, sending *atomic.Int64) (stop func()) {
	h := &heldCounts{name: c.name, held: held, sending: sending}
	heldBytes.mu.Lock()
	heldBytes.others[h] = struct{}{}
	heldBytes.mu.Unlock()
	return func() {
		heldBytes.mu.Lock()
		delete(heldBytes.others, h)
		heldBytes.mu.Unlock()
	}
}

// heldCounts is what Counts.Hold reports for a destination that is not a Dest.
type heldCounts struct {
	name          string
	held, sending *atomic.Int64
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
