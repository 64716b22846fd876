package kafka

import (
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a connection holds between two requests is what it holds while idle, for as long as
// the client keeps it open (-kafka.idle-timeout), times -kafka.max-connections: only small
// buffers may stay. After every answer a connection drops whatever points into the request
// it answered (the header, the decoded request, which alias the request buffer) and a
// response buffer grown past smallBufSize. A response that large (Metadata naming many
// topics, a subscription with many prefixes) holds intake limiter bytes while it is written,
// so that clients that never read their answers cannot pile them up.

var refusedResponses = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_kafka_refused_responses_total",
	Help: "Kafka answers over 16KiB not written, and their connection closed, because the intake limiter (-intake.max-bytes) had no room for them at once.",
})

// noteOut brings the buffered gauge in line with the capacity of the response buffer.
func (c *conn) noteOut() {
	if n := cap(c.out); n != c.outNoted {
		noteBuffered(n - c.outNoted)
		c.outNoted = n
	}
}

// reserveOut makes room for a response of about n bytes in one pooled buffer, rather than
// growing the small one by doubling (and leaving each step behind as garbage).
func (c *conn) reserveOut(n int) {
	if n <= cap(c.out) {
		return
	}
	c.out = (*pool.GetBytes(n))[:0]
	c.noteOut()
}

// chargeResponse takes limiter bytes for a response buffer larger than smallBufSize, without
// waiting (the request it answers has given back its own by now). It reports false, counted,
// when there was no room: the connection is then closed unanswered, as a request too large
// for the limiter would be. Smaller responses are bounded by the connection limit.
func (c *conn) chargeResponse() bool {
	n := cap(c.out)
	lim := c.s.cfg.Limiter
	if n <= smallBufSize || lim == nil {
		return true
	}
	if !lim.TryAcquireBytes(admission.IntakeKafka, int64(n)) {
		refusedResponses.Inc()
		return false
	}
	c.outCharged = int64(n)
	return true
}

// endResponse runs after every answer, written or not: it drops what refers to the request
// and gives back a large response buffer and its limiter bytes.
func (c *conn) endResponse() {
	c.hdr = header{}
	c.apiReq = kmsg.ApiVersionsRequest{}
	c.metaReq = kmsg.MetadataRequest{}
	c.metaResp = kmsg.MetadataResponse{}
	c.getReq = kmsg.GetTelemetrySubscriptionsRequest{}
	c.getResp = kmsg.GetTelemetrySubscriptionsResponse{}
	c.pushReq = kmsg.PushTelemetryRequest{}
	if c.outCharged > 0 {
		c.s.cfg.Limiter.ReleaseBytes(admission.IntakeKafka, c.outCharged)
		c.outCharged = 0
	}
	if cap(c.out) > smallBufSize {
		b := c.out[:0]
		pool.PutBytes(&b)
		c.out = nil
		c.noteOut()
	}
}

// closeOut gives back the response buffer of a closing connection.
func (c *conn) closeOut() {
	if c.outCharged > 0 {
		c.s.cfg.Limiter.ReleaseBytes(admission.IntakeKafka, c.outCharged)
		c.outCharged = 0
	}
	c.out = nil
	c.noteOut()
}

// respond encodes r after a response header for the current request. ApiVersions passes
// flexible false whatever its version.
func (c *conn) respond(r kmsg.Response, flexible bool) []byte {
	if c.out == nil {
		c.out = make([]byte, 0, 512)
	}
	c.out = appendResponseStart(c.out[:0], c.hdr.correlation, flexible)
	c.out = r.AppendTo(c.out)
	c.noteOut()
	return finishResponse(c.out, 0)
}
