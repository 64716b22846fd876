package client

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// validateKafka checks a ProtocolKafka destination: its brokers, topics, encoding, partitioner
// and SASL, and none of the keys that address a gRPC or HTTP upstream, which it would ignore.
func (c Config) validateKafka() error {
	k := c.Kafka
	switch {
	case len(k.Brokers) == 0:
		return errors.New("brokers is required for protocol kafka (brokers=kafka-1:9092,kafka-2:9092)")
	case c.Endpoint != "" || c.Resolver != "" || len(c.Endpoints) > 0 || c.EndpointsFile != "" || c.Path != "":
		return errors.New("protocol kafka produces to brokers: endpoint, resolver, endpoints and path are for the other protocols")
	case c.TracesPath != "" || c.MetricsPath != "" || c.LogsPath != "":
		return errors.New("signal paths are for protocol http, not kafka: kafka takes traces-topic, metrics-topic and logs-topic")
	case len(c.Headers) > 0 || c.BearerTokenFile != "":
		return errors.New("protocol kafka sends no fixed headers: header, header-file and bearer-token-file are for gRPC and HTTP; Kafka authenticates with sasl-*")
	case c.Mode == ModeStream:
		return errors.New("protocol kafka has no mode: the producer pipelines by itself")
	}
	for _, b := range k.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return fmt.Errorf("brokers: %q is not host:port", b)
		}
	}
	for _, t := range []struct{ key, v string }{{"topic", k.Topic}, {"traces-topic", k.TracesTopic}, {"metrics-topic", k.MetricsTopic}, {"logs-topic", k.LogsTopic}} {
		if err := validTopic(t.v); err != nil {
			return fmt.Errorf("%s %q: %w", t.key, t.v, err)
		}
	}
	switch k.Encoding {
	case "", KafkaOTLPProto, KafkaOTLPJSON:
	default:
		return fmt.Errorf("encoding %q (want otlp_proto or otlp_json)", k.Encoding)
	}
	switch k.Partition {
	case "", KafkaRoundRobin, KafkaByTraceID, KafkaByResource:
	default:
		return fmt.Errorf("partition %q (want round_robin, trace_id or resource)", k.Partition)
	}
	switch c.Compression {
	case "", "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return fmt.Errorf("compression %q (want gzip, snappy, lz4, zstd or none for protocol kafka)", c.Compression)
	}
	switch k.SASLMechanism {
	case "":
		if k.SASLUsername != "" || k.SASLPasswordFile != "" {
			return errors.New("sasl-username and sasl-password-file need sasl-mechanism (plain, scram-sha-256 or scram-sha-512)")
		}
	case KafkaSASLPlain, KafkaSASLScramSHA256, KafkaSASLScramSHA512:
		if k.SASLUsername == "" || k.SASLPasswordFile == "" {
			return fmt.Errorf("sasl-mechanism=%s needs sasl-username and sasl-password-file", k.SASLMechanism)
		}
	default:
		return fmt.Errorf("sasl-mechanism %q (want plain, scram-sha-256 or scram-sha-512)", k.SASLMechanism)
	}
	switch {
	case k.MaxMessageBytes != 0 && (k.MaxMessageBytes < 1<<10 || k.MaxMessageBytes > 1<<30):
		return fmt.Errorf("max-message-bytes %d outside 1KiB..1GiB", k.MaxMessageBytes)
	case c.QueueBytes <= 0:
		return errors.New("queue bytes must be positive")
	case c.AckTimeout <= 0:
		return errors.New("ack timeout must be positive")
	case c.RetryInitial <= 0:
		return errors.New("retry initial must be positive")
	case c.RetryMax < c.RetryInitial:
		return fmt.Errorf("retry max %v is below retry initial %v", c.RetryMax, c.RetryInitial)
	case c.RetryMaxElapsed < 0:
		return errors.New("retry max elapsed must not be negative (0: no limit)")
	}
	t := c.TLS
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		return errors.New("TLS needs both tls-cert and tls-key")
	case t.Insecure && (t.CAFile != "" || t.CertFile != "" || t.ServerName != "" || t.InsecureSkipVerify):
		return errors.New("tls-* options given for a plaintext destination (insecure=true)")
	}
	return c.validateForward() // the tenant's values become record headers of each batch
}

// validTopic reports a Kafka topic name the brokers would refuse: Kafka takes up to 249
// characters of ASCII letters, digits, '.', '_' and '-', and neither "." nor "..". The empty
// name is the default's.
func validTopic(t string) error {
	switch {
	case t == "":
		return nil
	case t == "." || t == "..":
		return errors.New("not a topic name")
	case len(t) > 249:
		return errors.New("longer than 249 characters")
	}
	if i := strings.IndexFunc(t, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}); i >= 0 {
		return fmt.Errorf("holds %q: a topic takes letters, digits, '.', '_' and '-'", t[i])
	}
	return nil
}

// Topics returns the topic of each signal (traces, metrics, logs): its own key's, else
// topic's, else the Collector's Kafka exporter's default (otlp_spans, otlp_metrics,
// otlp_logs). Safe for concurrent use.
func (k Kafka) Topics() [3]string {
	pick := func(own, def string) string {
		switch {
		case own != "":
			return own
		case k.Topic != "":
			return k.Topic
		}
		return def
	}
	return [3]string{pick(k.TracesTopic, "otlp_spans"), pick(k.MetricsTopic, "otlp_metrics"), pick(k.LogsTopic, "otlp_logs")}
}

// DefaultKafkaMaxMessageBytes is max-message-bytes without the key: the Collector's Kafka
// exporter's producer default, below the brokers' default message.max.bytes (1048588).
const DefaultKafkaMaxMessageBytes = 1000000

// MaxMessage is MaxMessageBytes, or its default when unset. Safe for concurrent use.
func (k Kafka) MaxMessage() int {
	if k.MaxMessageBytes == 0 {
		return DefaultKafkaMaxMessageBytes
	}
	return k.MaxMessageBytes
}
