package kafka

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The Kafka protocol as served here has no authentication of its own (no SASL): anyone who
// reaches the listener can push telemetry. TLS with client certificates is how a deployment
// restricts it to its own clients; the configuration comes from internal/credfile, as the gRPC
// and HTTP intakes' does.

var tlsHandshakeErrors = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_kafka_tls_handshake_errors_total",
	Help: "Kafka connections closed because their TLS handshake failed or did not finish within -kafka.read-timeout: no certificate, or one the -kafka.tls.client-ca does not sign, plain TCP to a TLS listener.",
})

// handshake runs the server side of the TLS handshake before the first request is read, under
// the read timeout: a client that connects and never completes it holds its connection no
// longer than one that stalls inside a request. It reports whether the connection may be
// served.
func (c *conn) handshake(tc *tls.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.ReadTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		tlsHandshakeErrors.Inc()
		return false
	}
	tc.SetDeadline(time.Time{})
	return true
}
