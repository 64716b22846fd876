package httpserver

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// format is how a request body is written.
type format uint8

const (
	encProto format = iota
	encJSON
	numFormats
)

var formatNames = [numFormats]string{"protobuf", "json"}

// Why a request was turned away before its body was looked at.
const (
	rejectNotFound = iota
	rejectMethod
	rejectMediaType
	rejectEncoding
	rejectBodyTooLarge
	rejectCorrupt
	rejectUnauthenticated
	rejectHeader
	rejectCORS
	rejectBusy
	rejectTenant
	numRejects
)

var rejectNames = [numRejects]string{"not_found", "method_not_allowed", "unsupported_media_type",
	"unsupported_encoding", "body_too_large", "corrupt_body", "unauthenticated", "bad_header", "cors_refused", "intake_busy",
	"tenant_refused"}

var (
	receivedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_received_requests_total",
		Help: "Well-formed requests received by the OTLP/HTTP intake (the status page's request rate), by encoding and signal.",
	}, []string{"encoding", "signal"})
	receivedItems = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_received_items_total",
		Help: "Items in well-formed requests received by the OTLP/HTTP intake, by encoding and signal.",
	}, []string{"encoding", "signal"})
	receivedBytes = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_received_bytes_total",
		Help: "Request body bytes received by the OTLP/HTTP intake, after decompression, by encoding and signal.",
	}, []string{"encoding", "signal"})
	refusedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_refused_requests_total",
		Help: "Requests not accepted, by format, signal and reason (invalid, queue_full, too_large, closed, upstream_failed, canceled, tenant_rate: the tenant was over -tenant.rate; spool_full: -spool.max-bytes reached; spool_io: the spool could not write; intake_bytes: -intake.max-bytes had no room for what processing writes; unserved: no destination takes the signal, -dest signals=).",
	}, []string{"encoding", "signal", "reason"})
	refusedItemsCounter = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_refused_items_total",
		Help: "Items in requests not accepted (unknown for invalid requests), by format, signal and reason.",
	}, []string{"encoding", "signal", "reason"})
	partialRejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_partially_rejected_entries_total",
		Help: "Malformed resource entries dropped from otherwise valid requests (answered with partial_success).",
	}, []string{"signal"})
	overloadAnswers = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_http_overload_responses_total",
		Help: "Requests answered 503 with Retry-After after -http.overload-after of sustained refusals (429 before).",
	})
	rejectedRequests = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_http_rejected_requests_total",
		Help: "Requests turned away before their body was read, by reason (not_found, method_not_allowed, unsupported_media_type, unsupported_encoding, body_too_large, corrupt_body, unauthenticated, bad_header, cors_refused, intake_busy: the intake limiter, -intake.max-bytes, refused to hold the body; tenant_refused: the tenant headers, -intake.headers, were refused, see otlpgate_tenant_refused_requests_total).",
	}, []string{"reason"})
)

type counters struct {
	items, bytes [numFormats][3]prometheus.Counter
	reqs         [numFormats][3]prometheus.Counter
	refused      [numFormats][3][admission.NumReasons]prometheus.Counter
	refusedItems [numFormats][3][admission.NumReasons]prometheus.Counter
	partial      [3]prometheus.Counter
	rejected     [numRejects]prometheus.Counter
}

var ctr = func() *counters {
	c := &counters{}
	for e := range numFormats {
		for s := fastpath.Traces; s <= fastpath.Logs; s++ {
			c.items[e][s] = receivedItems.WithLabelValues(formatNames[e], s.String())
			c.reqs[e][s] = receivedRequests.WithLabelValues(formatNames[e], s.String())
			c.bytes[e][s] = receivedBytes.WithLabelValues(formatNames[e], s.String())
			for r := range admission.NumReasons {
				c.refused[e][s][r] = refusedRequests.WithLabelValues(formatNames[e], s.String(), r.String())
				c.refusedItems[e][s][r] = refusedItemsCounter.WithLabelValues(formatNames[e], s.String(), r.String())
			}
		}
	}
	for s := fastpath.Traces; s <= fastpath.Logs; s++ {
		c.partial[s] = partialRejected.WithLabelValues(s.String())
	}
	for r := range numRejects {
		c.rejected[r] = rejectedRequests.WithLabelValues(rejectNames[r])
	}
	return c
}()

func (c *counters) refuse(e format, s fastpath.Signal, reason admission.Reason, items int) {
	c.refused[e][s][reason].Inc()
	if items > 0 {
		c.refusedItems[e][s][reason].Add(float64(items))
	}
}

// await waits for the upstream answer of a request admitted into b with items items
// (admission.Await) and counts one that was not delivered (upstream_failed, canceled) as
// refused, with its items, as admission counts its own refusals: the client is answered with
// a refusal either way. No counter says "accepted" (the received counters count a request
// when it arrives, before admission), so nothing is taken back: a request is counted received
// once and refused at most once, at admission or here, never both, since only an admitted
// request waits.
func (c *counters) await(ctx context.Context, e format, s fastpath.Signal, b *pipeline.Batch, items int) admission.Reason {
	reason := admission.Await(ctx, b)
	if reason != admission.Accepted {
		c.refuse(e, s, reason, items)
	}
	return reason
}
