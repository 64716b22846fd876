package pipeline

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

var (
	queueBytes = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_fastpath_queue_bytes",
		Help: "Bytes admitted and not yet finished by every destination (bounded by -queue.max-bytes).",
	}, livePipelines.queued)
	_ = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
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
// path never formats a label. What admission counts is in admit.go.
type pipelineMetrics struct {
	batchBytes, batchItems [fastpath.NumSignals]prometheus.Observer
	undeliveredC           [fastpath.NumSignals]prometheus.Counter
}

func newPipelineMetrics() *pipelineMetrics {
	m := &pipelineMetrics{}
	for s := fastpath.Signal(0); s < fastpath.NumSignals; s++ {
		n := s.String()
		m.batchBytes[s] = batchBytes.WithLabelValues(n)
		m.batchItems[s] = batchItems.WithLabelValues(n)
		m.undeliveredC[s] = undeliveredItems.WithLabelValues(n)
	}
	return m
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

func (m *pipelineMetrics) sealed(b *Batch) {
	m.batchBytes[b.Signal].Observe(float64(b.size))
	m.batchItems[b.Signal].Observe(float64(b.Items))
}

func (m *pipelineMetrics) undelivered(b *Batch) {
	m.undeliveredC[b.Signal].Add(float64(b.Items))
}
