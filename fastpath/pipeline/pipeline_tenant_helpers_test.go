package pipeline

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

func newTenants(t *testing.T, cfg tenant.Config) *tenant.Table {
	t.Helper()
	ts, err := tenant.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// lookup interns the tuple vals (nil: the header is missing) in ts.
func lookup(ts *tenant.Table, vals ...string) (*tenant.Tenant, error) {
	var k tenant.Key
	for _, v := range vals {
		ts.AddString(&k, v)
	}
	return ts.Lookup(&k)
}

func mustLookup(t *testing.T, ts *tenant.Table, vals ...string) *tenant.Tenant {
	t.Helper()
	tn, err := lookup(ts, vals...)
	if err != nil {
		t.Fatalf("lookup %q: %v", vals, err)
	}
	return tn
}

const testIdle = time.Minute

// idleTenants returns a table with -intake.tenant-idle testIdle on a clock the test moves.
func idleTenants(t *testing.T, cfg tenant.Config) (*tenant.Table, *atomic.Int64) {
	t.Helper()
	cfg.Idle = testIdle
	ts := newTenants(t, cfg)
	clock := &atomic.Int64{}
	clock.Store(int64(time.Hour))
	ts.SetClock(clock.Load)
	return ts, clock
}

// metricValue returns the value of the series of name with the label values labels (in the
// order of the metric's labels), 0 when there is none. The tenant package's metrics are its
// own: the pipeline's tests read them as /metrics would.
func metricValue(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for i, l := range m.GetLabel() {
				if l.GetValue() != labels[i] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
