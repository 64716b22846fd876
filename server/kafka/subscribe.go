package kafka

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/codec/kafkacompress"
)

var subscriptionRequests = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_kafka_subscription_requests_total",
	Help: "GetTelemetrySubscriptions requests answered.",
})

// acceptedCompression is offered in the client's order of preference; NONE is always accepted
// and never listed.
var acceptedCompression = []int8{
	int8(kafkacompress.Zstd),
	int8(kafkacompress.LZ4),
	int8(kafkacompress.Gzip),
	int8(kafkacompress.Snappy),
}

// getSubscriptions answers GetTelemetrySubscriptions. The response always carries the client
// instance id, fresh for a zero one: the client adopts whatever id it is given. A client id
// over -kafka.max-client-id-bytes gets INVALID_REQUEST and no instance.
func (c *conn) getSubscriptions() ([]byte, bool) {
	requestsGet.Inc()
	r := &c.getReq
	r.Version = c.hdr.version
	if err := r.UnsafeReadFrom(c.hdr.body); err != nil {
		badMalformed.Inc()
		return nil, false
	}
	subscriptionRequests.Inc()
	if !c.clientIDFits() {
		oversizedClientID.Inc()
		resp := &c.getResp
		*resp = kmsg.NewGetTelemetrySubscriptionsResponse()
		resp.Version = c.hdr.version
		resp.ErrorCode = errInvalidRequest
		return c.respond(resp, true), true
	}
	c.telemetry = true
	s := c.s
	a := s.reg.get(c, c.lbl, r.ClientInstanceID, s.currentSet(), s.now())

	resp := &c.getResp
	*resp = kmsg.NewGetTelemetrySubscriptionsResponse()
	resp.Version = c.hdr.version
	resp.ClientInstanceID = a.id
	resp.SubscriptionID = a.subID
	resp.AcceptedCompressionTypes = acceptedCompression
	resp.PushIntervalMillis = int32(a.plan.interval.Milliseconds())
	resp.TelemetryMaxBytes = int32(s.cfg.TelemetryMaxBytes)
	resp.DeltaTemporality = s.cfg.DeltaTemporality
	resp.RequestedMetrics = a.plan.requested
	return c.respond(resp, true), true
}
