// Package statusmetrics keeps the metrics the status page reads (admin's /status.json) in a
// registry of their own, Registry, besides the default registry that /metrics serves. The
// status sampler gathers Registry alone: a gather of the default registry reads every series
// otlpgate has, and its cost, nearly all of it client_golang's sorting and checking of each
// series, grows with every destination and fleet backend by the dozens of series the status never
// reads. A package registers such a metric with Auto (or MustRegister) instead of promauto or
// prometheus.MustRegister; it then is in both registries.
package statusmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Registry holds the metrics registered through Registerer: the status sampler's gatherer.
var Registry = prometheus.NewRegistry()

// Registerer registers a collector in prometheus.DefaultRegisterer (as read at the call) and in
// Registry, both or neither; Unregister takes it out of both.
var Registerer prometheus.Registerer = both{}

// Auto is promauto on Registerer.
var Auto = promauto.With(Registerer)

// MustRegister registers cs with Registerer and panics on an error, as prometheus.MustRegister.
func MustRegister(cs ...prometheus.Collector) { Registerer.MustRegister(cs...) }

type both struct{}

func (both) Register(c prometheus.Collector) error {
	if err := prometheus.DefaultRegisterer.Register(c); err != nil {
		return err
	}
	if err := Registry.Register(c); err != nil {
		prometheus.DefaultRegisterer.Unregister(c)
		return err
	}
	return nil
}

func (b both) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := b.Register(c); err != nil {
			panic(err)
		}
	}
}

func (both) Unregister(c prometheus.Collector) bool {
	a := prometheus.DefaultRegisterer.Unregister(c)
	s := Registry.Unregister(c)
	return a || s
}
