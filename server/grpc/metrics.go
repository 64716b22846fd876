package grpcserver

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// kind is the protocol a request came in by.
type kind uint8

const (
	kindV1 kind = iota
	kindOTEPUnary
	kindOTEPStream
	numKinds
)

var kindNames = [numKinds]string{"v1", "otep_unary", "otep_stream"}

var (
	receivedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_received_requests_total",
		Help: "Well-formed requests received by the gRPC intake (the status page's request rate), by protocol and signal.",
	}, []string{"protocol", "signal"})
	receivedItems = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_received_items_total",
		Help: "Items in well-formed requests received by the gRPC intake, by protocol and signal.",
	}, []string{"protocol", "signal"})
	receivedBytes = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_received_bytes_total",
		Help: "Request bytes received by the gRPC intake, by protocol and signal.",
	}, []string{"protocol", "signal"})
	refusedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_refused_requests_total",
		Help: "Requests not accepted, by protocol, signal and reason (invalid, queue_full, too_large, closed, upstream_failed, canceled, tenant_rate: the tenant was over -tenant.rate; spool_full: -spool.max-bytes reached; spool_io: the spool could not write; intake_bytes: -intake.max-bytes had no room for what processing writes; unserved: no destination takes the signal, -dest signals=).",
	}, []string{"protocol", "signal", "reason"})
	refusedItemsCounter = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_refused_items_total",
		Help: "Items in requests not accepted (unknown for invalid requests), by protocol, signal and reason.",
	}, []string{"protocol", "signal", "reason"})
	partialRejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_partially_rejected_entries_total",
		Help: "Malformed resource entries dropped from otherwise valid v1 requests (answered with partial_success).",
	}, []string{"signal"})
	overloadEnds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_overload_terminations_total",
		Help: "Calls and streams ended with UNAVAILABLE and RetryInfo after -grpc.overload-after of sustained refusals.",
	}, []string{"protocol"})
	rebalancedStreams = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_rebalanced_streams_total",
		Help: "OTEP streams the server ended to re-balance, by reason (max_age, max_requests).",
	}, []string{"reason"})
)

type counters struct {
	reqs         [numKinds][fastpath.NumSignals]prometheus.Counter
	items, bytes [numKinds][fastpath.NumSignals]prometheus.Counter
	refused      [numKinds][fastpath.NumSignals][admission.NumReasons]prometheus.Counter
	refusedItems [numKinds][fastpath.NumSignals][admission.NumReasons]prometheus.Counter
	partial      [fastpath.NumSignals]prometheus.Counter
	overload     [numKinds]prometheus.Counter
	rebalanceAge prometheus.Counter
	rebalanceReq prometheus.Counter
}

var ctr = func() *counters {
	c := &counters{}
	for k := range numKinds {
		for s := range fastpath.NumSignals {
			c.items[k][s] = receivedItems.WithLabelValues(kindNames[k], s.String())
			c.reqs[k][s] = receivedRequests.WithLabelValues(kindNames[k], s.String())
			c.bytes[k][s] = receivedBytes.WithLabelValues(kindNames[k], s.String())
			for r := range admission.NumReasons {
				c.refused[k][s][r] = refusedRequests.WithLabelValues(kindNames[k], s.String(), r.String())
				c.refusedItems[k][s][r] = refusedItemsCounter.WithLabelValues(kindNames[k], s.String(), r.String())
			}
		}
		c.overload[k] = overloadEnds.WithLabelValues(kindNames[k])
	}
	for s := range fastpath.NumSignals {
		c.partial[s] = partialRejected.WithLabelValues(s.String())
	}
	c.rebalanceAge = rebalancedStreams.WithLabelValues("max_age")
	c.rebalanceReq = rebalancedStreams.WithLabelValues("max_requests")
	return c
}()

func (c *counters) refuse(k kind, s fastpath.Signal, reason admission.Reason, items int) {
	c.refused[k][s][reason].Inc()
	if items > 0 {
		c.refusedItems[k][s][reason].Add(float64(items))
	}
}

// await waits for the upstream answer of a request admitted into b with items items
// (admission.Await) and counts one that was not delivered (upstream_failed, canceled) as
// refused, with its items, as admission counts its own refusals: the client is answered with
// a refusal either way. No counter says "accepted" (the received counters count a request
// when it arrives, before admission), so nothing is taken back: a request is counted received
// once and refused at most once, at admission or here, never both, since only an admitted
// request waits.
func (c *counters) await(ctx context.Context, k kind, s fastpath.Signal, b *pipeline.Batch, items int) admission.Reason {
	reason := admission.Await(ctx, b)
	if reason != admission.Accepted {
		c.refuse(k, s, reason, items)
	}
	return reason
}
