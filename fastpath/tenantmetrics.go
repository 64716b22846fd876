package fastpath

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-tenant counters, with a bounded label set: the first -tenant.metrics.top tenants seen
// since start get series of their own, labelled by their values (joined by '|'; the empty
// tuple reads "_default"), and every later one is summed under tenant="_other". First seen
// rather than largest: a tenant's series then never moves between its own label and
// "_other", so every series only ever grows, as a counter must (a set chosen by volume at each
// scrape would take a tenant's count out of "_other" when it rose, which reads as a reset). The
// counters are atomics on each Tenant, read at scrape time: the hot path formats no label.
// The process has one table; the last one made (NewTenants) owns the series.

var (
	tenantAdmittedItemsDesc = prometheus.NewDesc("otlpgate_tenant_admitted_items_total",
		"Spans, data points and log records admitted, by tenant (-intake.headers; the first -tenant.metrics.top tenants seen, the others summed as _other).",
		[]string{"tenant"}, nil)
	tenantAdmittedBytesDesc = prometheus.NewDesc("otlpgate_tenant_admitted_bytes_total",
		"Request bytes admitted, by tenant (-intake.headers; the first -tenant.metrics.top tenants seen, the others summed as _other).",
		[]string{"tenant"}, nil)
	tenantThrottledDesc = prometheus.NewDesc("otlpgate_tenant_throttled_requests_total",
		"Requests refused because their tenant was over -tenant.rate (429 + Retry-After, RESOURCE_EXHAUSTED + RetryInfo, FailedRetryable), by tenant (the first -tenant.metrics.top tenants seen, the others summed as _other).",
		[]string{"tenant"}, nil)
	metricsTable atomic.Pointer[Tenants]
)

func init() { prometheus.MustRegister(tenantCollector{}) }

// countAdmitted counts an admitted request of t (nil: no tenants).
func (t *Tenant) countAdmitted(items, bytes int) {
	if t == nil {
		return
	}
	t.admittedItems.Add(int64(items))
	t.admittedBytes.Add(int64(bytes))
}

// Throttled returns how many requests of the tenant were refused for its rate. Safe for
// concurrent use.
func (t *Tenant) Throttled() int64 { return t.throttled.Load() }

// tenantCollector reads the counters of the current table's tenants at scrape time.
type tenantCollector struct{}

func (tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tenantAdmittedItemsDesc
	ch <- tenantAdmittedBytesDesc
	ch <- tenantThrottledDesc
}

// otherTenants is the label under which the tenants past -tenant.metrics.top are summed.
const otherTenants = "_other"

func (tenantCollector) Collect(ch chan<- prometheus.Metric) {
	ts := metricsTable.Load()
	if ts == nil {
		return
	}
	var other [3]float64
	folded := false
	seen := map[string]bool{}
	for i, t := range ts.All() {
		v := [3]float64{float64(t.admittedItems.Load()), float64(t.admittedBytes.Load()), float64(t.throttled.Load())}
		label := t.label
		if label == "" {
			label = "_default"
		}
		// Two tuples whose values hold '|' may join to one label, and a tenant may be named
		// like the fold: those are folded too, so that no series is emitted twice.
		if i >= ts.cfg.MetricsTop || seen[label] || label == otherTenants {
			for j := range other {
				other[j] += v[j]
			}
			folded = true
			continue
		}
		seen[label] = true
		emitTenant(ch, label, v)
	}
	if folded {
		emitTenant(ch, otherTenants, other)
	}
}

func emitTenant(ch chan<- prometheus.Metric, label string, v [3]float64) {
	ch <- prometheus.MustNewConstMetric(tenantAdmittedItemsDesc, prometheus.CounterValue, v[0], label)
	ch <- prometheus.MustNewConstMetric(tenantAdmittedBytesDesc, prometheus.CounterValue, v[1], label)
	ch <- prometheus.MustNewConstMetric(tenantThrottledDesc, prometheus.CounterValue, v[2], label)
}
