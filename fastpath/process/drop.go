package process

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
)

var (
	droppedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_process_dropped_items_total",
		Help: "Spans, data points and log records of the resources -drop left out of their requests (the client was answered Success).",
	}, []string{"signal"})
	droppedResources = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_process_dropped_resources_total",
		Help: "Resource entries (ResourceSpans, ResourceMetrics, ResourceLogs) -drop left out of their requests.",
	}, []string{"signal"})
)

var droppedItemsC, droppedResourcesC = func() (items, res [fastpath.NumSignals]prometheus.Counter) {
	for s := range items {
		items[s] = droppedItems.WithLabelValues(fastpath.Signal(s).String())
		res[s] = droppedResources.WithLabelValues(fastpath.Signal(s).String())
	}
	return items, res
}()

// matches reports whether an attribute's string value v satisfies the rule.
func (m *Match) matches(v []byte) bool {
	if m.Prefix {
		return len(v) >= len(m.Value) && string(v[:len(m.Value)]) == m.Value
	}
	return string(v) == m.Value
}

func commitDropped(sig fastpath.Signal, t *Tally) {
	if t[tDroppedResources] > 0 {
		droppedResourcesC[sig].Add(float64(t[tDroppedResources]))
	}
	if t[tDroppedItems] > 0 {
		droppedItemsC[sig].Add(float64(t[tDroppedItems]))
	}
}
