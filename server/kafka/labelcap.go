package kafka

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The client's own strings become labels on every resource it pushes, on its instance, and in
// the selectors matched against it, so their length multiplies: by the resource entries of a
// push, by the instances of a connection. Kafka clients send short values; longer ones are
// never kept, whatever their characters.

var (
	oversizedLabels = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_oversized_labels_total",
		Help: "Kafka requests answered INVALID_REQUEST because a client label exceeded its cap, by label: client_id (-kafka.max-client-id-bytes; GetTelemetrySubscriptions and PushTelemetry), client_software_name and client_software_version (-kafka.max-software-bytes; ApiVersions).",
	}, []string{"label"})
	oversizedClientID        = oversizedLabels.WithLabelValues(labelClientID)
	oversizedSoftwareName    = oversizedLabels.WithLabelValues(labelClientSoftwareName)
	oversizedSoftwareVersion = oversizedLabels.WithLabelValues(labelClientSoftwareVersion)
)

// softwareFits reports whether the software name and version of an ApiVersions request are
// within the cap, counting the one that is not.
func (c *conn) softwareFits(name, version string) bool {
	limit := c.s.cfg.MaxSoftwareBytes
	switch {
	case len(name) > limit:
		oversizedSoftwareName.Inc()
		return false
	case len(version) > limit:
		oversizedSoftwareVersion.Inc()
		return false
	}
	return true
}

// clientIDFits reports whether the current request's client id is within the cap. A longer one
// is not recorded; the telemetry requests that would label with it are refused (and counted)
// by their handlers.
func (c *conn) clientIDFits() bool {
	return len(c.hdr.clientID) <= c.s.cfg.MaxClientIDBytes
}
