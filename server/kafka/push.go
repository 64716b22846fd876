package kafka

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/codec/kafkacompress"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
	"github.com/otlpgate/otlpgate/pool"
)

var (
	unknownSubscriptionRequests = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_unknown_subscription_requests_total",
		Help: "Pushes answered UNKNOWN_SUBSCRIPTION_ID: from an instance not known (after a restart, an eviction or an expiry; it is re-created) or with a stale subscription id. The client re-fetches at once.",
	})
	throttledPushes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_throttled_pushes_total",
		Help: "Pushes answered THROTTLING_QUOTA_EXCEEDED for arriving before the push interval had passed.",
	})
	exportedPushes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_exported_pushes_total",
		Help: "Pushes whose metrics were handed to the pipeline.",
	})
	exportedPoints = statusmetrics.Auto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_exported_points_total",
		Help: "Data points handed to the pipeline.",
	})
	emptyPushes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_empty_pushes_total",
		Help: "Accepted pushes with nothing to forward (no metrics, or none subscribed).",
	})
	exportErrors = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_export_errors_total",
		Help: "Pushes rejected, by reason: invalid_instance and after_terminating (INVALID_REQUEST), unsupported_compression, too_large (over -kafka.telemetry-max-bytes compressed or decompressed: TELEMETRY_TOO_LARGE), labels_too_large (the client labels added to every resource entry kept would take the body past twice -kafka.telemetry-max-bytes: TELEMETRY_TOO_LARGE), corrupt_compression and invalid_record (INVALID_RECORD), queue_full, spool_full, spool_io and intake_busy (THROTTLING_QUOTA_EXCEEDED; spool_full: -spool.max-bytes reached; spool_io: the spool could not write; intake_busy: the intake limiter of -intake.unauthenticated.max-bytes and -intake.max-decodes had no room within -intake.wait, or none for what processing writes), queue_too_large (TELEMETRY_TOO_LARGE), unserved (no destination takes metrics, -dest signals=: UNKNOWN_SUBSCRIPTION_ID, and the client is subscribed to no metrics from then on), consume_error (UNKNOWN_SERVER_ERROR).",
	}, []string{"reason"})
	errInvalidInstance     = exportErrors.WithLabelValues("invalid_instance")
	errAfterTerminating    = exportErrors.WithLabelValues("after_terminating")
	errUnsupportedCodec    = exportErrors.WithLabelValues("unsupported_compression")
	errTooLarge            = exportErrors.WithLabelValues("too_large")
	errLabelsTooLarge      = exportErrors.WithLabelValues("labels_too_large")
	errCorruptCompression  = exportErrors.WithLabelValues("corrupt_compression")
	errInvalidRecordMetric = exportErrors.WithLabelValues("invalid_record")
	errQueueFull           = exportErrors.WithLabelValues("queue_full")
	errSpoolFull           = exportErrors.WithLabelValues("spool_full")
	errSpoolIO             = exportErrors.WithLabelValues("spool_io")
	errIntakeBusy          = exportErrors.WithLabelValues("intake_busy")
	errQueueTooLarge       = exportErrors.WithLabelValues("queue_too_large")
	errUnserved            = exportErrors.WithLabelValues("unserved")
	errConsume             = exportErrors.WithLabelValues("consume_error")

	exportSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "otlpgate_kafka_export_duration_seconds",
		Help:    "Time from an admitted push to its hand-over to the pipeline: decompression, decoding, filtering, labelling, encoding.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14), // 25µs .. 200ms
	})
)

// pushTelemetry answers PushTelemetry. A client id over -kafka.max-client-id-bytes gets
// INVALID_REQUEST without touching any instance.
func (c *conn) pushTelemetry() ([]byte, bool) {
	requestsPush.Inc()
	r := &c.pushReq
	r.Version = c.hdr.version
	if err := r.UnsafeReadFrom(c.hdr.body); err != nil {
		badMalformed.Inc()
		return nil, false
	}
	resp := &c.pushResp
	*resp = kmsg.NewPushTelemetryResponse()
	resp.Version = c.hdr.version
	if !c.clientIDFits() {
		oversizedClientID.Inc()
		resp.ErrorCode = errInvalidRequest
		return c.respond(resp, true), true
	}
	c.telemetry = true
	resp.ErrorCode = c.s.push(c, r)
	return c.respond(resp, true), true
}

// push runs the checks of a push in order (instance checks under the registry lock, then the
// payload's), forwards what passes and returns the error code to answer.
func (s *Server) push(c *conn, r *kmsg.PushTelemetryRequest) int16 {
	v := s.reg.admitPush(c, c.lbl, r.ClientInstanceID, r.SubscriptionID, r.Terminating, s.currentSet(), s.now())
	switch v.reason {
	case pushOK:
	case pushInvalidInstance:
		errInvalidInstance.Inc()
		return v.code
	case pushAfterTerminating:
		errAfterTerminating.Inc()
		return v.code
	case pushUnknownInstance, pushStaleSubscription:
		unknownSubscriptionRequests.Inc()
		return v.code
	case pushThrottled:
		throttledPushes.Inc()
		return v.code
	}

	codec := kafkacompress.Codec(r.CompressionType)
	if !codec.Supported() {
		errUnsupportedCodec.Inc()
		return errUnsupportedCompressionType
	}
	if len(r.Metrics) > s.cfg.TelemetryMaxBytes {
		errTooLarge.Inc()
		return errTelemetryTooLarge
	}
	// The buffer a compressed push is decompressed into takes its bytes from the intake
	// limiter before anything is decompressed into it, and before the decode slot: a push
	// that holds a slot then never waits, so the slots always drain.
	var bp *[]byte
	if codec != kafkacompress.None {
		// Room for the whole limit: a zstd frame without a content size (librdkafka writes
		// none) is decoded into the capacity it is given, and one size keeps the buffer in
		// one pool class.
		size := pool.Cap(s.cfg.TelemetryMaxBytes)
		if lim := s.cfg.Limiter; lim != nil {
			if !lim.AcquireBytes(admission.IntakeKafka, int64(size), nil) {
				errIntakeBusy.Inc()
				c.pushResp.ThrottleMillis = int32(lim.Wait().Milliseconds())
				return errThrottlingQuotaExceeded
			}
			defer lim.ReleaseBytes(admission.IntakeKafka, int64(size))
		}
		bp = pool.GetBytes(s.cfg.TelemetryMaxBytes)
		*bp = (*bp)[:0:size]
		hold := noteBuffered(cap(*bp))
		defer func() { noteBuffered(-hold); pool.PutBytes(bp) }()
	}
	if lim := s.cfg.Limiter; lim != nil {
		// Decompressing and decoding hold several times the payload in buffers and objects: at
		// most -intake.max-decodes pushes do it at once.
		if !lim.AcquireDecode(admission.IntakeKafka, nil) {
			errIntakeBusy.Inc()
			c.pushResp.ThrottleMillis = int32(lim.Wait().Milliseconds())
			return errThrottlingQuotaExceeded
		}
		defer lim.ReleaseDecode()
	}
	start := time.Now()
	data := r.Metrics
	if bp != nil {
		out, err := s.dec.Decompress((*bp)[:0], codec, r.Metrics)
		*bp = out[:0] // keep what the decoder grew, for the pool
		switch {
		case errors.Is(err, kafkacompress.ErrTooLarge):
			errTooLarge.Inc()
			return errTelemetryTooLarge
		case err != nil:
			errCorruptCompression.Inc()
			return errInvalidRecord
		}
		data = out
	}
	points, sent, err := forward(c.next, data, v.plan, v.attrs, 2*s.cfg.TelemetryMaxBytes)
	exportSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err == nil && !sent:
		emptyPushes.Inc()
		return errNone
	case err == nil:
		exportedPushes.Inc()
		exportedPoints.Add(float64(points))
		return errNone
	case errors.Is(err, errLabelledTooLarge):
		errLabelsTooLarge.Inc()
		return errTelemetryTooLarge
	case errors.Is(err, errNotMetricsData):
		errInvalidRecordMetric.Inc()
		return errInvalidRecord
	case errors.Is(err, pipeline.ErrFull):
		// Backpressure: the client re-fetches after one interval and pushes again then.
		// Counted by its cause, under the reason the pipeline counts it by.
		switch {
		case errors.Is(err, pipeline.ErrSpoolFull):
			errSpoolFull.Inc()
		case errors.Is(err, pipeline.ErrSpoolIO):
			errSpoolIO.Inc()
		case errors.Is(err, pipeline.ErrBudget):
			errIntakeBusy.Inc()
		default:
			errQueueFull.Inc()
		}
		return errThrottlingQuotaExceeded
	case errors.Is(err, pipeline.ErrTooLarge):
		errQueueTooLarge.Inc()
		return errTelemetryTooLarge
	case errors.Is(err, pipeline.ErrUnserved):
		// The destinations changed since the client was subscribed and none takes metrics
		// now: counted under the reason the pipeline counts it by, apart from failures, and
		// answered so that the client fetches its subscription at once, which now asks for
		// no metrics (currentSet).
		errUnserved.Inc()
		return errUnknownSubscriptionID
	default:
		errConsume.Inc()
		return errUnknownServerError
	}
}
