package kafkaconsume

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// Skip reasons, the reason label of otlpgate_kafka_consume_skipped_records_total.
type skipReason uint8

const (
	skipUndecodable skipReason = iota // not an Export request of the topic's signal and encoding
	skipTooLarge                      // past -kafka.consume.max-record-bytes or -queue.max-bytes
	skipUnserved                      // no destination takes its signal (-dest signals=)
	skipTenant                        // its tenant headers are refused (bad value, too many, no route)
	// skipBatchTooLarge: its batch decompresses past -kafka.consume.max-batch-bytes. Not
	// too_large: no record of the batch was read, a batch of small records can hit it, and
	// the bound to raise is another.
	skipBatchTooLarge
	numSkipReasons
)

var skipNames = [numSkipReasons]string{"undecodable", "too_large", "unserved", "tenant", "batch_too_large"}

var (
	records = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_records_total",
		Help: "Kafka records the consumer intake read and admitted, by signal (skipped ones are in otlpgate_kafka_consume_skipped_records_total).",
	}, []string{"signal"})
	items = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_items_total",
		Help: "Spans, data points and log records in the Kafka records the consumer intake admitted, by signal.",
	}, []string{"signal"})
	recordBytes = statusmetrics.Auto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_bytes_total",
		Help: "Bytes of the Kafka record values the consumer intake read.",
	})
	skipped = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_skipped_records_total",
		Help: "Kafka records the consumer intake skipped because they can never be admitted, by reason (undecodable: not an OTLP request of the topic's signal and encoding; too_large: past -kafka.consume.max-record-bytes or -queue.max-bytes; unserved: no destination takes the signal; tenant: the tenant its headers name is refused; batch_too_large: its record batch decompresses past -kafka.consume.max-batch-bytes, each offset of the batch counted, none read). Each is committed with its partition, and logged at most once per 10s.",
	}, []string{"reason"})
	backpressure = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_backpressure_waits_total",
		Help: "Times the consumer intake waited, polling nothing, because the queue held its share (-kafka.consume.queue-share), the pipeline had no room for a record (-queue.max-bytes, -intake.unauthenticated.max-bytes), or the intake limiter none for an otlp_json record's protobuf form (-intake.max-bytes).",
	})
	rewinds = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_rewinds_total",
		Help: "Times a partition was read again from a record whose batch a destination gave up undelivered (ack timeout, retry-max-elapsed).",
	})
	undeliverable = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_rejected_records_total",
		Help: "Kafka records whose batch a destination's upstream refused for good (counted there too, in otlpgate_client_dropped_items_total): committed, since reading them again cannot help.",
	})
	commits = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_commits_total",
		Help: "Offset commits of the consumer intake, by outcome (ok, error).",
	}, []string{"outcome"})
	deferredBatches = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_deferred_batches_total",
		Help: "Compressed Kafka record batches the consumer's client did not decompress when fetched because it held -kafka.consume.max-buffered-bytes of fetched records not yet taken; each is fetched again once they are, nothing is skipped.",
	})
	fetchErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_fetch_errors_total",
		Help: "Errors the Kafka client reported while fetching (brokers unreachable, authentication); it retries by itself.",
	})
	lag = statusmetrics.Auto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_consume_lag",
		Help: "Records of a partition assigned to the consumer intake past its committed offset (the brokers' high watermark, from the last fetch or from the end offsets listed every third of -kafka.consume.stall-timeout, minus the committed offset).",
	}, []string{"topic", "partition"})
	stalled = statusmetrics.Auto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_consume_stalled_partitions",
		Help: "Partitions of the consumer intake whose read position has not moved for -kafka.consume.stall-timeout, outside waits for room, while the brokers hold records past it or their leader does not answer its end offset for as long (each logged when it stalls, and when it moves again or its leader answers again with nothing past it).",
	})
	stalls = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_consume_stalls_total",
		Help: "Times a partition of the consumer intake stalled (see otlpgate_kafka_consume_stalled_partitions).",
	})
	assignedParts = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_consume_partitions",
		Help: "Partitions assigned to the consumer intake now, from their assignment on, whether or not a record of them was fetched yet.",
	})

	recordsC, itemsC = bySignal(records), bySignal(items)
	skippedC         = func() (c [numSkipReasons]prometheus.Counter) {
		for r := range numSkipReasons {
			c[r] = skipped.WithLabelValues(skipNames[r])
		}
		return c
	}()
	commitOK, commitErr = commits.WithLabelValues("ok"), commits.WithLabelValues("error")
)

func bySignal(v *prometheus.CounterVec) (c [fastpath.NumSignals]prometheus.Counter) {
	for s := range fastpath.NumSignals {
		c[s] = v.WithLabelValues(fastpath.Signal(s).String())
	}
	return c
}
