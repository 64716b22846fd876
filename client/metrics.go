package client

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

var (
	sentRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_sent_requests_total",
		Help: "Requests written to the upstream, every attempt included.",
	}, []string{"destination", "backend"})
	sentBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_sent_bytes_total",
		Help: "Payload bytes of the requests written to the upstream, before compression.",
	}, []string{"destination", "backend"})
	ackedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_acknowledged_requests_total",
		Help: "Requests the upstream acknowledged with Success (v1: an OK response).",
	}, []string{"destination", "backend"})
	ackedItems = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_acknowledged_items_total",
		Help: "Spans, data points and log records the upstream acknowledged with Success.",
	}, []string{"destination", "backend"})
	retriedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_retried_requests_total",
		Help: "Requests scheduled to be sent again after a backoff, by reason (failed_retryable, throttled, ack_timeout: a unary call not answered within ack-timeout).",
	}, []string{"destination", "backend", "reason"})
	resentRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_resent_requests_total",
		Help: "Requests sent again at once because the stream they were pending on ended without answering them, or their answer was later than ack-timeout; the upstream may have them twice (possible duplicates).",
	}, []string{"destination", "backend"})
	unprocessedRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_unprocessed_requests_total",
		Help: "Calls of transport=otlpgate that the upstream said it did not process (a GOAWAY whose last stream id is below the call's, REFUSED_STREAM), sent again at once on another connection: the upstream has them once (unlike otlpgate_client_resent_requests_total).",
	}, []string{"destination", "backend"})
	ackTimeouts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_ack_timeouts_total",
		Help: "Requests whose answer was later than ack-timeout. Each is sent again (stream mode: at once, on a new stream when its stream answered nothing, counted in otlpgate_client_resent_requests_total; unary and http: after a backoff, counted in otlpgate_client_retried_requests_total{reason=\"ack_timeout\"}) unless its retry budget ran out (dropped, retry_exhausted) or retry-on-reconnect=false (dropped, ack_timeout).",
	}, []string{"destination", "backend"})
	droppedRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_dropped_requests_total",
		Help: "Requests given up on, by reason; shutdown_* reasons count what Shutdown could not deliver.",
	}, []string{"destination", "backend", "reason"})
	droppedItems = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_dropped_items_total",
		Help: "Spans, data points and log records of the dropped requests, by reason.",
	}, []string{"destination", "backend", "reason"})
	partialRejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_partially_rejected_items_total",
		Help: "Items a v1 or OTLP/HTTP upstream reported rejected in a partial success answer, at most the items of the request it answers (see otlpgate_client_impossible_partial_successes_total).",
	}, []string{"destination", "backend"})
	unreadableAnswers = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_unreadable_answers_total",
		Help: "Answers to requests the upstream took that were larger than max-recv-msg-size and so not read (a gRPC unary answer after its headers, an OTLP/HTTP 2xx body). Their requests count as delivered, in otlpgate_client_acknowledged_items_total, never as dropped; what such an answer said (a partial success, an OTEP result code) is unknown.",
	}, []string{"destination", "backend"})
	impossiblePartial = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_impossible_partial_successes_total",
		Help: "Partial success answers that reported more items rejected than the request held, or fewer than none; otlpgate_client_partially_rejected_items_total counts the request's items (or none) for each instead.",
	}, []string{"destination", "backend"})
	ackLatency = statusmetrics.Auto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "otlpgate_client_ack_latency_seconds",
		Help:    "Time from sending a request to reading its answer, any result code.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 17), // 0.5ms .. 33s
	}, []string{"destination", "backend"})
	throttles = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_throttles_total",
		Help: "Times the upstream asked the destination to pause (UNAVAILABLE or RESOURCE_EXHAUSTED with RetryInfo).",
	}, []string{"destination", "backend"})
	streamsOpened = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_streams_opened_total",
		Help: "OTEP streams opened.",
	}, []string{"destination", "backend"})
	streamsEnded = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_streams_ended_total",
		Help: "OTEP streams ended, by how: rebalance_age, rebalance_requests and rebalance_bytes (half-closed by the client), closed (by the server, cleanly), broken (an error), ack_timeout (given up by the client: nothing answered on it within ack-timeout).",
	}, []string{"destination", "backend", "how"})
	unknownAcks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_unknown_acks_total",
		Help: "Answers whose id matches no request pending on that stream (late after an ack timeout, or a server bug).",
	}, []string{"destination", "backend"})
	returnedRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_returned_to_spool_requests_total",
		Help: "Requests a destination stopping (a reload that replaced or removed it, or the process's shutdown) did not deliver by its deadline, with -spool.dir: their records stay in the spool, read again by the destination's replacement or by the next start, so they are not counted in otlpgate_client_dropped_requests_total.",
	}, []string{"destination", "backend"})
	returnedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_returned_to_spool_items_total",
		Help: "Spans, data points and log records of the requests returned to the spool.",
	}, []string{"destination", "backend"})
	handedOver = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_client_handed_over_requests_total",
		Help: "Requests a balanced destination took back from one of its backends (it left the set or was ejected), to send them to another.",
	}, []string{"destination", "backend"})
)

// queueBytesDesc is otlpgate_client_queue_bytes and inFlightDesc otlpgate_client_in_flight_requests,
// which heldBytes reports.
var (
	queueBytesDesc = prometheus.NewDesc("otlpgate_client_queue_bytes",
		"Bytes the destination holds: queued, in flight and waiting for a retry (bounded by queue-bytes).",
		[]string{"destination", "backend"}, nil)
	inFlightDesc = prometheus.NewDesc("otlpgate_client_in_flight_requests",
		"Requests sent and not yet answered.",
		[]string{"destination", "backend"}, nil)
	unservedDesc = prometheus.NewDesc("otlpgate_client_unserved_signals",
		"Signals the upstream answered it does not serve (gRPC UNIMPLEMENTED, HTTP 404): a configuration error (protocol, endpoint or path; the destination's last error says which), shown as down on the status page; their requests are kept and sent again after the backoff, as in an outage, and the first delivery of the signal clears it. Alert on any value above 0.",
		[]string{"destination", "backend"}, nil)
)

// heldBytes reports otlpgate_client_queue_bytes, otlpgate_client_in_flight_requests and
// otlpgate_client_unserved_signals from each destination's own counters (Dest.held,
// Dest.sending, Dest.unserved) at scrape time, rather than from gauges
// kept in step with them. A destination joins in New and
// leaves when Shutdown returns; destinations that share a name (a process may build a second
// one after shutting the first) are summed under it, so a scrape never sees a label set twice.
var heldBytes = func() *heldCollector {
	c := &heldCollector{dests: map[*Dest]struct{}{}, others: map[*heldCounts]struct{}{}}
	statusmetrics.MustRegister(c)
	return c
}()

type heldCollector struct {
	mu     sync.Mutex
	dests  map[*Dest]struct{}
	others map[*heldCounts]struct{} // destinations of other packages (Counts.Hold)
}

func (c *heldCollector) add(d *Dest) {
	c.mu.Lock()
	c.dests[d] = struct{}{}
	c.mu.Unlock()
}

func (c *heldCollector) remove(d *Dest) {
	c.mu.Lock()
	delete(c.dests, d)
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueBytesDesc
	ch <- inFlightDesc
	ch <- unservedDesc
}

// Collect implements prometheus.Collector. Safe for concurrent use.
func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ name, backend string }
	type sum struct{ held, sending, unserved int64 }
	sums := map[key]sum{}
	c.mu.Lock()
	for d := range c.dests {
		k := key{d.cfg.Name, d.backend}
		s := sums[k]
		s.held += d.held.Load()
		s.sending += d.sending.Load()
		s.unserved += int64(d.unservedSignals())
		sums[k] = s
	}
	for h := range c.others {
		k := key{h.name, ""}
		s := sums[k]
		s.held += h.held.Load()
		s.sending += h.sending.Load()
		sums[k] = s
	}
	c.mu.Unlock()
	for k, v := range sums {
		ch <- prometheus.MustNewConstMetric(queueBytesDesc, prometheus.GaugeValue, float64(v.held), k.name, k.backend)
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(v.sending), k.name, k.backend)
		ch <- prometheus.MustNewConstMetric(unservedDesc, prometheus.GaugeValue, float64(v.unserved), k.name, k.backend)
	}
}

// Ways a stream ends, for otlpgate_client_streams_ended_total.
const (
	endRebalanceAge = iota
	endRebalanceRequests
	endRebalanceBytes
	endClosed
	endBroken
	endAckTimeout
	numStreamEnds
)

var streamEndNames = [numStreamEnds]string{"rebalance_age", "rebalance_requests", "rebalance_bytes", "closed", "broken", "ack_timeout"}

// destMetrics holds one destination's label children, resolved once by New so that the hot
// path never formats a label.
type destMetrics struct {
	sentRequests, sentBytes  prometheus.Counter
	ackedRequests, ackedItem prometheus.Counter
	retried                  [numRetryReasons]prometheus.Counter
	resent                   prometheus.Counter
	ackTimeouts              prometheus.Counter
	dropped, droppedItems    [numDropReasons]prometheus.Counter
	partialRejected          prometheus.Counter
	impossiblePartial        prometheus.Counter
	unreadableAnswers        prometheus.Counter
	unprocessed              prometheus.Counter
	inFlight                 prometheus.Collector // this destination's sent, unanswered requests alone, for tests
	queueBytes               prometheus.Collector // this destination's held bytes alone, for tests
	ackLatency               prometheus.Observer
	throttles                prometheus.Counter
	streamsOpened            prometheus.Counter
	streamsEnded             [numStreamEnds]prometheus.Counter
	unknownAcks              prometheus.Counter
	handedOver               prometheus.Counter
	returnedRequests         prometheus.Counter
	returnedItems            prometheus.Counter
}

// newDestMetrics resolves the children of destination name; backend is the member's address in
// a balanced destination, "" otherwise (Prometheus shows an empty label as absent, so plain
// destinations keep the series they always had).
func newDestMetrics(name, backend string) *destMetrics {
	m := &destMetrics{
		sentRequests:    sentRequests.WithLabelValues(name, backend),
		sentBytes:       sentBytes.WithLabelValues(name, backend),
		ackedRequests:   ackedRequests.WithLabelValues(name, backend),
		ackedItem:       ackedItems.WithLabelValues(name, backend),
		resent:          resentRequests.WithLabelValues(name, backend),
		ackTimeouts:     ackTimeouts.WithLabelValues(name, backend),
		partialRejected: partialRejected.WithLabelValues(name, backend),
		ackLatency:      ackLatency.WithLabelValues(name, backend),
		throttles:       throttles.WithLabelValues(name, backend),
		streamsOpened:   streamsOpened.WithLabelValues(name, backend),
		unknownAcks:     unknownAcks.WithLabelValues(name, backend),
		handedOver:      handedOver.WithLabelValues(name, backend),
	}
	m.returnedRequests = returnedRequests.WithLabelValues(name, backend)
	m.returnedItems = returnedItems.WithLabelValues(name, backend)
	m.unreadableAnswers = unreadableAnswers.WithLabelValues(name, backend)
	m.unprocessed = unprocessedRequests.WithLabelValues(name, backend)
	m.impossiblePartial = impossiblePartial.WithLabelValues(name, backend)
	for i := range m.retried {
		m.retried[i] = retriedRequests.WithLabelValues(name, backend, RetryReason(i).String())
	}
	for i := range m.dropped {
		m.dropped[i] = droppedRequests.WithLabelValues(name, backend, DropReason(i).String())
		m.droppedItems[i] = droppedItems.WithLabelValues(name, backend, DropReason(i).String())
	}
	for i := range m.streamsEnded {
		m.streamsEnded[i] = streamsEnded.WithLabelValues(name, backend, streamEndNames[i])
	}
	return m
}

// forgetBackend deletes the series of one member of a balanced destination, once it left the
// resolved set for good: with resolver=dns every pod address ever seen would otherwise keep its
// series for the life of the process. Safe for concurrent use.
func forgetBackend(name, backend string) {
	l := prometheus.Labels{"destination": name, "backend": backend}
	for _, v := range []*prometheus.CounterVec{sentRequests, sentBytes, ackedRequests, ackedItems, retriedRequests,
		resentRequests, unprocessedRequests, ackTimeouts, droppedRequests, droppedItems, partialRejected, throttles, streamsOpened, streamsEnded,
		unknownAcks, handedOver, unreadableAnswers, impossiblePartial, returnedRequests, returnedItems} {
		v.DeletePartialMatch(l)
	}
	ackLatency.DeletePartialMatch(l)
}
