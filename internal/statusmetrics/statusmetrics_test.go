package statusmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func names(t *testing.T, g prometheus.Gatherer) map[string]bool {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]bool{}
	for _, f := range fams {
		n[f.GetName()] = true
	}
	return n
}

// A collector registered through Registerer is in both registries, a refused one in neither,
// and Unregister takes it out of both.
func TestRegistersInBoth(t *testing.T) {
	def := prometheus.NewRegistry()
	old := prometheus.DefaultRegisterer
	prometheus.DefaultRegisterer = def
	t.Cleanup(func() { prometheus.DefaultRegisterer = old })
	own := Registry
	Registry = prometheus.NewRegistry()
	t.Cleanup(func() { Registry = own })

	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_both_total"})
	MustRegister(c)
	if !names(t, def)["test_both_total"] || !names(t, Registry)["test_both_total"] {
		t.Fatalf("registered: default %v, status %v", names(t, def), names(t, Registry))
	}

	// Taken by the status registry alone (a name clash there): the default registry must not
	// keep it either.
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_clash"})
	Registry.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_clash"}))
	if err := Registerer.Register(clash); err == nil {
		t.Fatal("a clash in the status registry was not refused")
	}
	if names(t, def)["test_clash"] {
		t.Fatal("the default registry kept a collector the status registry refused")
	}

	if !Registerer.Unregister(c) {
		t.Fatal("Unregister reported nothing taken out")
	}
	if names(t, def)["test_both_total"] || names(t, Registry)["test_both_total"] {
		t.Fatal("Unregister left the collector registered")
	}
}
