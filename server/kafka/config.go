package kafka

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/otlpgate/otlpgate/codec/kafkacompress"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
)

// Config of the Kafka KIP-714 intake. cmd/ maps each field to the flag named in its comment.
type Config struct {
	// Listen is the TCP address Kafka clients connect to (-kafka.listen, default "": the
	// listener is off; e.g. 127.0.0.1:9093).
	Listen string
	// AdvertisedAddress is the host:port this listener lists as the cluster's only broker in
	// Metadata; clients reconnect there and push their telemetry on that connection
	// (-kafka.advertised-address, default "": the local address each client connected to).
	AdvertisedAddress string
	// MaxRequestBytes caps one request; a larger one closes the connection, counted in
	// otlpgate_kafka_bad_requests_total{reason="too_large"} (-kafka.max-request-bytes, default
	// 4MiB). It must exceed TelemetryMaxBytes so that an oversized push is answered
	// TELEMETRY_TOO_LARGE rather than disconnected.
	MaxRequestBytes int
	// IdleTimeout closes a connection that sends nothing for this long, and the client
	// instances that pushed on it (-kafka.idle-timeout, default 10m), counted in
	// otlpgate_kafka_timeouts_total{kind="idle"}. Every push interval must be shorter.
	IdleTimeout time.Duration
	// ReadTimeout bounds how long a request may take to arrive once its first byte did
	// (-kafka.read-timeout, default 30s). A client that stalls or trickles a request holds a
	// connection and a buffer; past this it is closed, counted in
	// otlpgate_kafka_timeouts_total{kind="read"}.
	ReadTimeout time.Duration
	// WriteTimeout bounds the write of one response (-kafka.write-timeout, default 10s).
	WriteTimeout time.Duration
	// MaxConnections caps concurrent connections; more are closed at once, counted in
	// otlpgate_kafka_rejected_connections_total (-kafka.max-connections, default 1024).
	MaxConnections int
	// MaxInstances caps the client instances remembered; past it the least recently seen is
	// evicted, counted in otlpgate_kafka_instances_removed_total{reason="evicted"}
	// (-kafka.max-instances, default 10000).
	MaxInstances int
	// SubscriptionsFile is a YAML (or .json) file of subscriptions, re-read by Reload on
	// SIGHUP (-kafka.subscriptions, default "": only the default subscription).
	SubscriptionsFile string
	// DefaultMetrics are the metric name prefixes of the default subscription, which matches
	// every client; "*" is every metric, empty disables the default subscription
	// (-kafka.default-metrics, comma-separated, default "*").
	DefaultMetrics []string
	// DefaultInterval is the push interval of the default subscription and of file
	// subscriptions without one, and how often a client no subscription matches asks again
	// (-kafka.default-interval, default 1m; 100ms to 1h).
	DefaultInterval time.Duration
	// TelemetryMaxBytes is the largest push accepted, compressed and decompressed alike;
	// larger ones are answered TELEMETRY_TOO_LARGE and counted in
	// otlpgate_kafka_export_errors_total{reason="too_large"} (-kafka.telemetry-max-bytes,
	// default 1MiB).
	TelemetryMaxBytes int
	// MaxClientIDBytes caps the client id a client is labelled with. A longer one is never
	// kept: GetTelemetrySubscriptions and PushTelemetry carrying it are answered
	// INVALID_REQUEST (the client stops its telemetry), counted in
	// otlpgate_kafka_oversized_labels_total{label="client_id"} (-kafka.max-client-id-bytes,
	// default 256). Kafka clients send short ids ("rdkafka", "producer-1").
	MaxClientIDBytes int
	// MaxSoftwareBytes caps the client software name and version of ApiVersions v3+; a longer
	// one is answered INVALID_REQUEST, as Apache Kafka answers a malformed one, counted in
	// otlpgate_kafka_oversized_labels_total{label="client_software_name"} or
	// {label="client_software_version"} (-kafka.max-software-bytes, default 128).
	MaxSoftwareBytes int
	// MaxInstanceBytes bounds the memory of the client instances remembered, as estimated by
	// instanceBytes; past it the least recently seen are evicted, counted in
	// otlpgate_kafka_instances_removed_total{reason="evicted"} and measured by
	// otlpgate_kafka_instance_bytes (-kafka.max-instance-bytes, default 16MiB).
	MaxInstanceBytes int64
	// TLSCert, TLSKey: server certificate and key files (PEM) that turn TLS on for the listener;
	// TLSClientCA: a CA file that turns on mutual TLS, so that only clients with a certificate
	// it signed are served (-kafka.tls.cert, -kafka.tls.key, -kafka.tls.client-ca, default ""
	// each: plain TCP). The Kafka protocol as served here has no other authentication. A
	// failed handshake is counted in otlpgate_kafka_tls_handshake_errors_total.
	TLSCert, TLSKey, TLSClientCA string
	// DeltaTemporality asks clients for delta sums and histograms instead of cumulative ones
	// (-kafka.delta-temporality, default true).
	DeltaTemporality bool
	// Limiter is the process-wide intake limiter (-intake.*), nil for none; Kafka draws from
	// the budget of the unauthenticated intakes (-intake.unauthenticated.max-bytes). A request
	// larger than 16KiB takes bytes as its buffer grows while the body arrives (the connection
	// is not read while it waits); a push takes a decode slot, then the bytes of the buffer it
	// is decompressed into, before it is decompressed. A refused push is answered
	// THROTTLING_QUOTA_EXCEEDED with a throttle time, counted in
	// otlpgate_kafka_export_errors_total{reason="intake_busy"}. The budget must hold a
	// request of MaxRequestBytes and a decompression buffer of TelemetryMaxBytes.
	Limiter *admission.Limiter
}

// DefaultConfig returns the defaults documented on Config. Safe for concurrent use.
func DefaultConfig() Config {
	return Config{
		MaxRequestBytes:   4 << 20,
		IdleTimeout:       10 * time.Minute,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      10 * time.Second,
		MaxConnections:    1024,
		MaxInstances:      10000,
		DefaultMetrics:    []string{allMetrics},
		DefaultInterval:   time.Minute,
		TelemetryMaxBytes: 1 << 20,
		MaxClientIDBytes:  256,
		MaxSoftwareBytes:  128,
		MaxInstanceBytes:  16 << 20,
		DeltaTemporality:  true,
	}
}

// maxRequestBytesLimit bounds MaxRequestBytes: Kafka sizes are int32, and one request is held
// in memory whole.
const maxRequestBytesLimit = 1 << 30

// maxLabelLimit bounds the label caps: a client id's length is an int16.
const maxLabelLimit = 32767

// minInstanceBytesLimit is the smallest instance budget: room for a few instances with every
// label at its largest.
const minInstanceBytesLimit = 64 << 10

// Validate reports a configuration that cannot work. An empty Listen is valid (off); the rest is
// checked anyway so that a bad flag is reported even when the listener is off. Safe for
// concurrent use.
func (c Config) Validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("kafka: bad listen address %q: %w", c.Listen, err)
		}
	}
	if c.AdvertisedAddress != "" {
		if _, _, err := splitAdvertised(c.AdvertisedAddress); err != nil {
			return err
		}
	}
	if c.TelemetryMaxBytes < 1024 || c.TelemetryMaxBytes > kafkacompress.MaxLimit {
		return fmt.Errorf("kafka: telemetry max bytes %d outside [1KiB, %d]", c.TelemetryMaxBytes, kafkacompress.MaxLimit)
	}
	if c.MaxRequestBytes <= c.TelemetryMaxBytes || c.MaxRequestBytes > maxRequestBytesLimit {
		return fmt.Errorf("kafka: max request bytes %d must exceed telemetry max bytes %d and be at most %d", c.MaxRequestBytes, c.TelemetryMaxBytes, maxRequestBytesLimit)
	}
	if c.Limiter != nil && int64(c.MaxRequestBytes+pool.Cap(c.TelemetryMaxBytes)) > c.Limiter.MaxBytesFor(admission.IntakeKafka) {
		return fmt.Errorf("kafka: max request bytes %d and a decompression buffer of telemetry max bytes %d exceed the intake limit %d (-intake.unauthenticated.max-bytes)",
			c.MaxRequestBytes, c.TelemetryMaxBytes, c.Limiter.MaxBytesFor(admission.IntakeKafka))
	}
	if c.IdleTimeout <= 0 {
		return errors.New("kafka: idle timeout must be positive")
	}
	if c.ReadTimeout <= 0 {
		return errors.New("kafka: read timeout must be positive")
	}
	if c.WriteTimeout <= 0 {
		return errors.New("kafka: write timeout must be positive")
	}
	if c.MaxConnections < 1 {
		return errors.New("kafka: max connections must be at least 1")
	}
	if c.MaxInstances < 1 {
		return errors.New("kafka: max instances must be at least 1")
	}
	// A request header's client id has an int16 length; software names are compact strings
	// but clients keep them as short as ids.
	if c.MaxClientIDBytes < 1 || c.MaxClientIDBytes > maxLabelLimit {
		return fmt.Errorf("kafka: max client id bytes %d outside [1, %d]", c.MaxClientIDBytes, maxLabelLimit)
	}
	if c.MaxSoftwareBytes < 1 || c.MaxSoftwareBytes > maxLabelLimit {
		return fmt.Errorf("kafka: max software bytes %d outside [1, %d]", c.MaxSoftwareBytes, maxLabelLimit)
	}
	if c.MaxInstanceBytes < minInstanceBytesLimit {
		return fmt.Errorf("kafka: max instance bytes %d below %d", c.MaxInstanceBytes, minInstanceBytesLimit)
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("kafka: TLS needs both a certificate and a key")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return errors.New("kafka: a client CA (mTLS) needs a server certificate")
	}
	if c.DefaultInterval < MinInterval || c.DefaultInterval > MaxInterval {
		return fmt.Errorf("kafka: default interval %v outside [%v, %v]", c.DefaultInterval, MinInterval, MaxInterval)
	}
	if c.DefaultInterval >= c.IdleTimeout {
		return fmt.Errorf("kafka: default interval %v must be shorter than the idle timeout %v", c.DefaultInterval, c.IdleTimeout)
	}
	// The default subscription goes through the same checks as a file's.
	if len(c.DefaultMetrics) > 0 {
		if _, err := compileSubscription(subscriptionEntry{Name: defaultSubscriptionName, Metrics: c.DefaultMetrics}, c.DefaultInterval); err != nil {
			return fmt.Errorf("kafka: default metrics: %w", err)
		}
	}
	return nil
}

// splitAdvertised parses host:port with a numeric port in 1..65535.
func splitAdvertised(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("kafka: bad advertised address %q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || host == "" {
		return "", 0, fmt.Errorf("kafka: bad advertised address %q: want host:port", addr)
	}
	return host, int32(p), nil
}
