package fastpath

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

const (
	reasonQueueFull = iota
	reasonTooLarge
	reasonSpoolFull
	reasonSpoolIO
	numReasons
)

var reasonNames = [numReasons]string{"queue_full", "too_large", "spool_full", "spool_io"}

var (
	admittedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_admitted_items_total",
		Help: "Spans, data points and log records admitted into the pipeline.",
	}, []string{"signal"})
	admittedBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_admitted_bytes_total",
		Help: "Request bytes admitted into the pipeline.",
	}, []string{"signal"})
	refusedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_refused_items_total",
		Help: "Items refused at admission, by reason (queue_full: -queue.max-bytes reached; too_large: one request exceeds it; spool_full: -spool.max-bytes reached; spool_io: the spool could not write).",
	}, []string{"signal", "reason"})
	strippedFields = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_stripped_fields_total",
		Help: "Top-level fields of admitted requests other than the resource entries (and the OTEP id), left out of the batch: they mean nothing once requests are concatenated.",
	}, []string{"signal"})
	strippedBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_stripped_bytes_total",
		Help: "Bytes of the top-level fields counted in otlpgate_fastpath_stripped_fields_total.",
	}, []string{"signal"})
	queueBytes = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_fastpath_queue_bytes",
		Help: "Bytes admitted and not yet finished by every destination (bounded by -queue.max-bytes).",
	}, livePipelines.queued)
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_fastpath_queue_max_bytes",
		Help: "The bound of otlpgate_fastpath_queue_bytes (-queue.max-bytes): alert on their ratio.",
	}, livePipelines.limit)
	batchBytes = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "otlpgate_fastpath_batch_bytes",
		Help:    "Size of sealed batches.",
		Buckets: prometheus.ExponentialBuckets(1024, 4, 8),
	}, []string{"signal"})
	batchItems = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "otlpgate_fastpath_batch_items",
		Help:    "Items in sealed batches.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 9),
	}, []string{"signal"})
	undeliveredItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_undelivered_items_total",
		Help: "Items in batches that at least one destination did not deliver (see the destination's own drop counters for why).",
	}, []string{"signal"})
)

// pipelineMetrics holds the label children a pipeline touches, resolved once so that the hot
// path never formats a label.
type pipelineMetrics struct {
	admittedItems, admittedBytes [NumSignals]prometheus.Counter
	strippedFields, strippedByte [NumSignals]prometheus.Counter
	refusedC                     [NumSignals][numReasons]prometheus.Counter
	batchBytes, batchItems       [NumSignals]prometheus.Observer
	undeliveredC                 [NumSignals]prometheus.Counter
}

func newPipelineMetrics() *pipelineMetrics {
	m := &pipelineMetrics{}
	for s := Signal(0); s < NumSignals; s++ {
		n := s.String()
		m.admittedItems[s] = admittedItems.WithLabelValues(n)
		m.admittedBytes[s] = admittedBytes.WithLabelValues(n)
		m.strippedFields[s] = strippedFields.WithLabelValues(n)
		m.strippedByte[s] = strippedBytes.WithLabelValues(n)
		for r := range numReasons {
			m.refusedC[s][r] = refusedItems.WithLabelValues(n, reasonNames[r])
		}
		m.batchBytes[s] = batchBytes.WithLabelValues(n)
		m.batchItems[s] = batchItems.WithLabelValues(n)
		m.undeliveredC[s] = undeliveredItems.WithLabelValues(n)
	}
	return m
}

func (m *pipelineMetrics) admitted(s Signal, items, bytes int) {
	m.admittedItems[s].Add(float64(items))
	m.admittedBytes[s].Add(float64(bytes))
}

// livePipelines are the pipelines whose budget otlpgate_fastpath_queue_bytes sums: the gauge
// reads each one's own counter at scrape time instead of keeping a copy. A pipeline joins in
// New and leaves once it is closed and every byte it admitted is finished.
var livePipelines = &pipelineSet{set: map[*Pipeline]struct{}{}}

type pipelineSet struct {
	mu  sync.Mutex
	set map[*Pipeline]struct{}
}

func (s *pipelineSet) add(p *Pipeline) {
	s.mu.Lock()
	s.set[p] = struct{}{}
	s.mu.Unlock()
}

func (s *pipelineSet) remove(p *Pipeline) {
	s.mu.Lock()
	delete(s.set, p)
	s.mu.Unlock()
}

func (s *pipelineSet) queued() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for p := range s.set {
		n += p.queued.Load()
	}
	return float64(n)
}

func (s *pipelineSet) limit() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for p := range s.set {
		n += p.cfg.QueueMaxBytes
	}
	return float64(n)
}

func (m *pipelineMetrics) stripped(s Signal, st Stripped) {
	m.strippedFields[s].Add(float64(st.Fields))
	m.strippedByte[s].Add(float64(st.Bytes))
}

func (m *pipelineMetrics) refused(s Signal, reason, items int) {
	m.refusedC[s][reason].Add(float64(items))
}

func (m *pipelineMetrics) sealed(b *Batch) {
	m.batchBytes[b.Signal].Observe(float64(b.size))
	m.batchItems[b.Signal].Observe(float64(b.Items))
}

func (m *pipelineMetrics) undelivered(b *Batch) {
	m.undeliveredC[b.Signal].Add(float64(b.Items))
}
