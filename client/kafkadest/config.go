package kafkadest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
)

// Config of the Kafka destination. FromDest builds it from a -dest value's client.Config, whose
// keys are the reference (docs/destinations.md); the fields repeat their meaning.
type Config struct {
	// Name labels the destination in the client's series and in logs.
	Name string
	// Brokers the client bootstraps from (brokers).
	Brokers []string
	// Topics is each signal's topic, by fastpath.Signal (traces-topic, metrics-topic,
	// logs-topic, topic).
	Topics [fastpath.NumSignals]string
	// JSON writes records as OTLP/JSON (encoding=otlp_json) instead of protobuf.
	JSON bool
	// ByTraceID sends spans one record per trace, keyed by the trace id (partition=trace_id).
	ByTraceID bool
	// ForwardHeaders are tenant headers whose values, taken from each batch's tenant, every
	// record of the batch carries as Kafka record headers (forward-headers), for a consumer
	// that reads the tenant from them (-kafka.consume.tenant-from-headers).
	ForwardHeaders []string
	// ByResource sends records of one resource each, keyed by the Collector's hash of its
	// attributes (partition=resource, reskey.go).
	ByResource bool
	// Compression of record batches: "", gzip, snappy, lz4 or zstd (compression).
	Compression string
	// MaxMessageBytes bounds a record batch (max-message-bytes).
	MaxMessageBytes int
	// QueueBytes bounds what the destination holds: queued, being produced, waiting for a
	// retry (queue-bytes); past it batches are refused at hand-over.
	QueueBytes int64
	// DeliveryTimeout is how long the producer tries to deliver a record before it reports
	// it failed, to be produced again after the backoff (ack-timeout).
	DeliveryTimeout time.Duration
	// RetryInitial, RetryMax and RetryMaxElapsed shape the backoff between attempts and bound
	// how long after the destination took a batch it may still be tried (0: no limit).
	RetryInitial, RetryMax, RetryMaxElapsed time.Duration
	// TLS, nil for plaintext.
	TLS *tls.Config
	// SASL mechanism (client.KafkaSASL*), "" for none, with its user and password.
	SASLMechanism, SASLUser, SASLPassword string
}

// FromDest returns the Config of a -dest value with protocol=kafka. It reads the TLS files.
func FromDest(c client.Config) (Config, error) {
	if c.Protocol != client.ProtocolKafka {
		return Config{}, fmt.Errorf("kafkadest: destination %q has protocol %s", c.Name, c.Protocol)
	}
	k := c.Kafka
	topics := k.Topics()
	kc := Config{
		Name:            c.Name,
		Brokers:         k.Brokers,
		Topics:          [fastpath.NumSignals]string{fastpath.Traces: topics[0], fastpath.Metrics: topics[1], fastpath.Logs: topics[2]},
		JSON:            k.Encoding == client.KafkaOTLPJSON,
		ByTraceID:       k.Partition == client.KafkaByTraceID,
		ByResource:      k.Partition == client.KafkaByResource,
		Compression:     c.Compression,
		MaxMessageBytes: k.MaxMessage(),
		QueueBytes:      c.QueueBytes,
		DeliveryTimeout: c.AckTimeout,
		RetryInitial:    c.RetryInitial,
		RetryMax:        c.RetryMax,
		RetryMaxElapsed: c.RetryMaxElapsed,
		SASLMechanism:   k.SASLMechanism,
		SASLUser:        k.SASLUsername,
		SASLPassword:    k.Password(),
		ForwardHeaders:  c.ForwardHeaders,
	}
	if kc.Compression == "none" {
		kc.Compression = ""
	}
	if !c.TLS.Insecure {
		tc, err := c.TLS.ClientConfig()
		if err != nil {
			return Config{}, fmt.Errorf("kafkadest: destination %q: %w", c.Name, err)
		}
		kc.TLS = tc
	}
	return kc, kc.Validate()
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("kafkadest: empty name")
	case len(c.Brokers) == 0:
		return errors.New("kafkadest: no brokers")
	case c.MaxMessageBytes < 1<<10:
		return errors.New("kafkadest: max message bytes below 1KiB")
	case c.QueueBytes <= 0:
		return errors.New("kafkadest: queue bytes must be positive")
	case c.DeliveryTimeout <= 0:
		return errors.New("kafkadest: delivery timeout must be positive")
	case c.RetryInitial <= 0 || c.RetryMax < c.RetryInitial:
		return errors.New("kafkadest: retry initial must be positive and at most retry max")
	case c.RetryMaxElapsed < 0:
		return errors.New("kafkadest: retry max elapsed must not be negative")
	}
	for s, t := range c.Topics {
		if t == "" {
			return fmt.Errorf("kafkadest: no topic for %s", fastpath.Signal(s))
		}
	}
	switch c.Compression {
	case "", "gzip", "snappy", "lz4", "zstd":
	default:
		return fmt.Errorf("kafkadest: compression %q", c.Compression)
	}
	switch c.SASLMechanism {
	case "", client.KafkaSASLPlain, client.KafkaSASLScramSHA256, client.KafkaSASLScramSHA512:
	default:
		return fmt.Errorf("kafkadest: SASL mechanism %q", c.SASLMechanism)
	}
	return nil
}
