package kafkaconsume

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// Encodings of a record's value.
const (
	EncodingProto = "otlp_proto" // an Export*ServiceRequest in protobuf (the Collector's default)
	EncodingJSON  = "otlp_json"  // the same request in OTLP/JSON
)

// SASL mechanisms.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Config of the consumer intake. cmd/ maps each field to the flag named in its comment.
type Config struct {
	// Brokers the client bootstraps from (-kafka.consume.brokers, comma-separated host:port;
	// empty turns the consumer off).
	Brokers []string
	// Topics are the topics read, each with its signal and encoding
	// (-kafka.consume.topics: TOPIC[:SIGNAL[:ENCODING]], comma-separated; see ParseTopics).
	Topics []Topic
	// Group is the consumer group (-kafka.consume.group, default otlpgate).
	Group string
	// ScanDepth is how deeply a record is checked before it is admitted (-grpc.scan-depth,
	// which every intake shares).
	ScanDepth fastpath.Depth
	// MaxRecordBytes bounds a record's value (-kafka.consume.max-record-bytes, default 16MiB);
	// a larger one is skipped, counted in
	// otlpgate_kafka_consume_skipped_records_total{reason="too_large"}. An OTLP/JSON record's
	// protobuf form is bounded by four times it, and by the intake limiter's budget.
	MaxRecordBytes int
	// MaxBatchBytes bounds what one fetched record batch decompresses to
	// (-kafka.consume.max-batch-bytes, default 32MiB). The client decompresses a batch before
	// any record in it is looked at, so without it a compressed batch of zeros a few KiB on the
	// wire costs up to the client's own bound, 1GiB, per partition fetched at once. A batch past
	// it is skipped whole, its records counted in
	// otlpgate_kafka_consume_skipped_records_total{reason="batch_too_large"}. The default is
	// twice MaxRecordBytes' default: a batch of one record of the largest size admitted fits
	// with its framing, and producers' batches of many records are far smaller (1MB in
	// franz-go and sarama, 16KiB in the Java client by default). It must be at least
	// MaxRecordBytes.
	MaxBatchBytes int
	// MaxBufferedBytes bounds what fetched records take decompressed inside the Kafka client
	// before the poll loop takes them (-kafka.consume.max-buffered-bytes, default 128MiB):
	// MaxBatchBytes bounds one batch, but a fetch can carry thousands of small compressed
	// batches each just under it. A compressed batch met while the client holds this much is
	// put off, not skipped: the client fetches it again once the poll loop took what it holds
	// (otlpgate_kafka_consume_deferred_batches_total). The client can pass it by one batch per
	// broker it reads from at once; a batch is never put off while the client holds nothing,
	// so a bound below MaxBatchBytes reads one batch at a time. At least 1KiB.
	MaxBufferedBytes int
	// Limiter is the process-wide intake limiter (-intake.*), nil for none: the protobuf form
	// of an OTLP/JSON record is charged to it, as the HTTP intake's transcoding output is,
	// while it is built and admitted.
	Limiter *admission.Limiter
	// MaxPollRecords bounds the records taken from the client at once
	// (-kafka.consume.max-poll-records, default 1000).
	MaxPollRecords int
	// FetchMaxBytes bounds what one fetch brings from the brokers, and so what the client
	// buffers while admission waits (-kafka.consume.fetch-max-bytes, default 16MiB).
	FetchMaxBytes int32
	// QueueShare is the share of the queue the consumer fills (-kafka.consume.queue-share,
	// default 0.5): it admits a record only while what the queue holds (-queue.max-bytes, or
	// the spool's -spool.max-bytes, less the segment being written), with the record, stays
	// within this share of its bound, and otherwise waits as for a full queue. Kafka keeps the
	// backlog; the rest of the queue is kept for the intakes whose clients cannot wait, and
	// /readyz, which fails at 90%, stays true while the consumer catches up. A record arriving
	// at an empty queue is admitted whatever its size. In (0, 1].
	QueueShare float64
	// CommitInterval is how often the acknowledged offsets are committed
	// (-kafka.consume.commit-interval, default 1s). What a restart re-reads is at most what
	// was in flight plus this much.
	CommitInterval time.Duration
	// RevokeWait bounds how long a partition the group takes away waits for its records in
	// flight before its offset is committed (-kafka.consume.revoke-wait, default 10s); the
	// rest is read again by the new owner.
	RevokeWait time.Duration
	// SessionTimeout is the group's session timeout (-kafka.consume.session-timeout,
	// default 45s).
	SessionTimeout time.Duration
	// TenantFromHeaders reads the tenant from the record's headers named by -intake.headers
	// (-kafka.consume.tenant-from-headers); else records are the default tenant's.
	TenantFromHeaders bool
	// Tenants is the tenant table (-intake.headers), nil without tenants. Set by the gateway.
	Tenants *tenant.Table
	// TLS, nil for plaintext (-kafka.consume.tls.*). Set by the gateway from the flags.
	TLS *tls.Config
	// SASLMechanism is "", SASLPlain, SASLScramSHA256 or SASLScramSHA512
	// (-kafka.consume.sasl.mechanism), with SASLUser (-kafka.consume.sasl.username) and
	// SASLPassword (read from -kafka.consume.sasl.password-file).
	SASLMechanism, SASLUser, SASLPassword string
	// StallTimeout is how long a partition's read position may stay still, outside waits for
	// room, while the brokers hold records past it (or its leader does not answer its end
	// offset), before it is logged and counted in otlpgate_kafka_consume_stalled_partitions
	// (-kafka.consume.stall-timeout, default 1m). The end offsets are listed every third of it.
	StallTimeout time.Duration
	// LogInterval bounds the log lines of skipped records: at most one per interval, with the
	// count of those not logged (default 10s).
	LogInterval time.Duration
}

// Topic is one topic the consumer reads.
type Topic struct {
	Name   string
	Signal fastpath.Signal
	JSON   bool // values are otlp_json
}

// DefaultConfig returns the defaults documented on Config: the consumer off.
func DefaultConfig() Config {
	return Config{
		Group:            "otlpgate",
		ScanDepth:        fastpath.DepthFull,
		MaxRecordBytes:   16 << 20,
		MaxBatchBytes:    32 << 20,
		MaxPollRecords:   1000,
		MaxBufferedBytes: 128 << 20,
		FetchMaxBytes:    16 << 20,
		QueueShare:       0.5,
		CommitInterval:   time.Second,
		RevokeWait:       10 * time.Second,
		SessionTimeout:   45 * time.Second,
		StallTimeout:     time.Minute,
		LogInterval:      10 * time.Second,
	}
}

// On reports whether the consumer is configured.
func (c Config) On() bool { return len(c.Brokers) > 0 }

// Validate reports a configuration that cannot work, naming the flags.
func (c Config) Validate() error {
	if !c.On() {
		if len(c.Topics) > 0 {
			return errors.New("-kafka.consume.topics needs -kafka.consume.brokers")
		}
		return nil
	}
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return fmt.Errorf("-kafka.consume.brokers: %q is not host:port", b)
		}
	}
	seen := map[string]bool{}
	for _, t := range c.Topics {
		if seen[t.Name] {
			return fmt.Errorf("-kafka.consume.topics names %q twice", t.Name)
		}
		seen[t.Name] = true
	}
	switch {
	case len(c.Topics) == 0:
		return errors.New("-kafka.consume.brokers needs -kafka.consume.topics")
	case c.Group == "":
		return errors.New("-kafka.consume.group must not be empty")
	case c.MaxRecordBytes < 1<<10 || c.MaxRecordBytes > 1<<30:
		return fmt.Errorf("-kafka.consume.max-record-bytes %d outside 1KiB..1GiB", c.MaxRecordBytes)
	case c.MaxBatchBytes < c.MaxRecordBytes || c.MaxBatchBytes > math.MaxInt32:
		return fmt.Errorf("-kafka.consume.max-batch-bytes %d outside -kafka.consume.max-record-bytes (%d)..%d", c.MaxBatchBytes, c.MaxRecordBytes, math.MaxInt32)
	case c.MaxBufferedBytes < 1<<10:
		return errors.New("-kafka.consume.max-buffered-bytes must be at least 1KiB")
	case c.MaxPollRecords < 1:
		return errors.New("-kafka.consume.max-poll-records must be at least 1")
	case c.FetchMaxBytes < 1<<10:
		return errors.New("-kafka.consume.fetch-max-bytes must be at least 1KiB")
	case !(c.QueueShare > 0 && c.QueueShare <= 1):
		return fmt.Errorf("-kafka.consume.queue-share %v outside (0, 1]", c.QueueShare)
	case c.CommitInterval < 10*time.Millisecond:
		return errors.New("-kafka.consume.commit-interval must be at least 10ms")
	case c.RevokeWait < 0:
		return errors.New("-kafka.consume.revoke-wait must not be negative")
	case c.SessionTimeout < time.Second:
		return errors.New("-kafka.consume.session-timeout must be at least 1s")
	case c.StallTimeout < time.Second:
		return errors.New("-kafka.consume.stall-timeout must be at least 1s")
	case c.LogInterval <= 0:
		return errors.New("kafkaconsume: log interval must be positive")
	case c.ScanDepth > fastpath.DepthFull:
		return errors.New("kafkaconsume: bad scan depth")
	}
	switch c.SASLMechanism {
	case "":
		if c.SASLUser != "" {
			return errors.New("-kafka.consume.sasl.username needs -kafka.consume.sasl.mechanism (plain, scram-sha-256 or scram-sha-512)")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLUser == "" || c.SASLPassword == "" {
			return fmt.Errorf("-kafka.consume.sasl.mechanism=%s needs -kafka.consume.sasl.username and -kafka.consume.sasl.password-file", c.SASLMechanism)
		}
	default:
		return fmt.Errorf("-kafka.consume.sasl.mechanism %q (want plain, scram-sha-256 or scram-sha-512)", c.SASLMechanism)
	}
	return nil
}

// defaultTopics are the Collector's Kafka receiver's default topics, whose signal need not be
// named.
var defaultTopics = map[string]fastpath.Signal{"otlp_spans": fastpath.Traces, "otlp_metrics": fastpath.Metrics, "otlp_logs": fastpath.Logs}

// ParseTopics reads -kafka.consume.topics: comma-separated TOPIC[:SIGNAL[:ENCODING]], SIGNAL
// traces, metrics or logs (optional for the Collector's default topics otlp_spans,
// otlp_metrics and otlp_logs), ENCODING otlp_proto or otlp_json (default: defEncoding,
// -kafka.consume.encoding).
func ParseTopics(s, defEncoding string) ([]Topic, error) {
	if defEncoding != EncodingProto && defEncoding != EncodingJSON {
		return nil, fmt.Errorf("-kafka.consume.encoding %q (want otlp_proto or otlp_json)", defEncoding)
	}
	var out []Topic
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) > 3 {
			return nil, fmt.Errorf("-kafka.consume.topics: %q is not TOPIC[:SIGNAL[:ENCODING]]", item)
		}
		t := Topic{Name: parts[0], JSON: defEncoding == EncodingJSON}
		if err := validTopic(t.Name); err != nil {
			return nil, fmt.Errorf("-kafka.consume.topics: %q: %w", t.Name, err)
		}
		sig, known := defaultTopics[t.Name]
		if len(parts) >= 2 && parts[1] != "" {
			switch parts[1] {
			case "traces":
				sig = fastpath.Traces
			case "metrics":
				sig = fastpath.Metrics
			case "logs":
				sig = fastpath.Logs
			default:
				return nil, fmt.Errorf("-kafka.consume.topics: %q: signal %q (want traces, metrics or logs)", item, parts[1])
			}
		} else if !known {
			return nil, fmt.Errorf("-kafka.consume.topics: %q: name its signal (%s:traces, :metrics or :logs)", item, t.Name)
		}
		t.Signal = sig
		if len(parts) == 3 {
			switch parts[2] {
			case EncodingProto:
				t.JSON = false
			case EncodingJSON:
				t.JSON = true
			default:
				return nil, fmt.Errorf("-kafka.consume.topics: %q: encoding %q (want otlp_proto or otlp_json)", item, parts[2])
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// validTopic reports a name Kafka would refuse as a topic.
func validTopic(t string) error {
	switch {
	case t == "" || t == "." || t == "..":
		return errors.New("not a topic name")
	case len(t) > 249:
		return errors.New("longer than 249 characters")
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("holds %q: a topic takes letters, digits, '.', '_' and '-'", r)
		}
	}
	return nil
}
