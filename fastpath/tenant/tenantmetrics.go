package tenant

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
// The process has one table; the last one made (NewTable) owns the series.
//
// A labelled series belongs to its tuple of values for the life of the process: when its
// tenant leaves the table (-intake.tenant-idle), the series keeps the tenant's counts, and the
// tuple coming back as a new tenant counts on in it; its label is never given to another
// tuple, so that the label set stays the first -tenant.metrics.top tuples seen. An expired
// tenant past the top is summed into "_other" for good. Counts a holder of an expired tenant
// adds after the sweep (a request between its Lookup and its admission) are not shown.

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
	metricsTable atomic.Pointer[Table]
)

func init() { prometheus.MustRegister(tenantCollector{}) }

// CountAdmitted counts an admitted request of t (nil: no tenants). Safe for concurrent use.
func (t *Tenant) CountAdmitted(items, bytes int) {
	if t == nil {
		return
	}
	t.admittedItems.Add(int64(items))
	t.admittedBytes.Add(int64(bytes))
}

// Admitted returns the items and bytes of the tenant's admitted requests. Safe for concurrent
// use.
func (t *Tenant) Admitted() (items, bytes int64) {
	return t.admittedItems.Load(), t.admittedBytes.Load()
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

// seriesLocked are a table's labelled series, under its lock.
type seriesLocked struct {
	series  []tenantSeries   // in the order assigned
	byLabel map[string]int32 // label: index in series
	other   [3]float64       // the counts of expired tenants past the top
	folded  bool             // some tenant was ever counted in "_other"
}

// tenantSeries is one labelled series: its tuple's key, and the counts of its tenants that
// left the table.
type tenantSeries struct {
	key, label string
	gone       [3]float64
}

// counts reads t's counters.
func (t *Tenant) counts() [3]float64 {
	return [3]float64{float64(t.admittedItems.Load()), float64(t.admittedBytes.Load()), float64(t.throttled.Load())}
}

// assignSeriesLocked gives t, not yet published, its series: the one of its tuple, a new one
// while fewer than -tenant.metrics.top are assigned, or none ("_other"). Two tuples whose
// values hold '|' may join to one label, and a tenant may be named like the fold: those go to
// "_other" too, so that no series is emitted twice.
func (ts *Table) assignSeriesLocked(t *Tenant) {
	s := &ts.mu.seriesLocked
	label := t.label
	if label == "" {
		label = "_default"
	}
	t.series = -1
	if i, ok := s.byLabel[label]; ok {
		if s.series[i].key == t.key {
			t.series = i
		}
		return
	}
	if len(s.series) >= ts.cfg.MetricsTop || label == otherTenants {
		return
	}
	if s.byLabel == nil {
		s.byLabel = map[string]int32{}
	}
	t.series = int32(len(s.series))
	s.byLabel[label] = t.series
	s.series = append(s.series, tenantSeries{key: t.key, label: label})
}

// foldSeriesLocked keeps the counts of t, which left the table, in its series.
func (ts *Table) foldSeriesLocked(t *Tenant) {
	s := &ts.mu.seriesLocked
	sum := &s.other
	if t.series >= 0 {
		sum = &s.series[t.series].gone
	} else {
		s.folded = true
	}
	for j, v := range t.counts() {
		sum[j] += v
	}
}

func (tenantCollector) Collect(ch chan<- prometheus.Metric) {
	ts := metricsTable.Load()
	if ts == nil {
		return
	}
	ts.mu.Lock()
	s := &ts.mu.seriesLocked
	vals := make([][3]float64, len(s.series))
	for i := range s.series {
		vals[i] = s.series[i].gone
	}
	other, folded := s.other, s.folded
	for _, t := range ts.mu.all {
		if t == nil {
			continue
		}
		sum := &other
		if t.series >= 0 {
			sum = &vals[t.series]
		} else {
			folded = true
		}
		for j, v := range t.counts() {
			sum[j] += v
		}
	}
	s.folded = folded
	labels := make([]string, len(s.series))
	for i := range s.series {
		labels[i] = s.series[i].label
	}
	ts.mu.Unlock()
	for i, v := range vals {
		emitTenant(ch, labels[i], v)
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
