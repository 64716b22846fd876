package pipeline

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// The per-tenant series: the first -tenant.metrics.top tenants seen, the rest summed as
// _other, the default tuple as _default; counts follow admissions and refusals.
func TestTenantMetrics(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, MetricsTop: 2,
		Rate: tenant.Rate{PerSecond: 1, Burst: 100}})
	cfg := testConfig()
	cfg.Tenants = ts
	p := newTestPipeline(t, cfg, sink{})
	for _, v := range []string{"acme", "beta", "gamma"} {
		tn := mustLookup(t, ts, v)
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: entry(10, 1), Items: 3}); err != nil {
			t.Fatal(err)
		}
		tn.Take(1000, 1) // over the burst: admitted on a full bucket
		tn.Take(1000, 1) // refused
	}
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 2}) // the default tenant: the first seen
	want := `
# HELP otlpgate_tenant_admitted_items_total Spans, data points and log records admitted, by tenant (-intake.headers; the first -tenant.metrics.top tenants seen, the others summed as _other).
# TYPE otlpgate_tenant_admitted_items_total counter
otlpgate_tenant_admitted_items_total{tenant="_default"} 2
otlpgate_tenant_admitted_items_total{tenant="_other"} 6
otlpgate_tenant_admitted_items_total{tenant="acme"} 3
# HELP otlpgate_tenant_throttled_requests_total Requests refused because their tenant was over -tenant.rate (429 + Retry-After, RESOURCE_EXHAUSTED + RetryInfo, FailedRetryable), by tenant (the first -tenant.metrics.top tenants seen, the others summed as _other).
# TYPE otlpgate_tenant_throttled_requests_total counter
otlpgate_tenant_throttled_requests_total{tenant="_default"} 0
otlpgate_tenant_throttled_requests_total{tenant="_other"} 2
otlpgate_tenant_throttled_requests_total{tenant="acme"} 1
`
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(want),
		"otlpgate_tenant_admitted_items_total", "otlpgate_tenant_throttled_requests_total"); err != nil {
		t.Fatal(err)
	}
	// The series gather with the default registry's others.
	if _, err := prometheus.DefaultGatherer.Gather(); err != nil {
		t.Fatal(err)
	}
}
