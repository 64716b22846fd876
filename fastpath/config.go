package fastpath

import (
	"errors"
	"fmt"
	"time"
)

// AckMode says when an intake may acknowledge a request.
type AckMode uint8

const (
	// AckAccept acknowledges once the request is admitted: its bytes are in an open batch or a
	// destination queue, counted against Config.QueueMaxBytes.
	AckAccept AckMode = iota
	// AckUpstream acknowledges only once every destination's upstream acknowledged the batch
	// holding the request (end to end, slower).
	AckUpstream
)

// ParseAckMode reads the -ack flag's value.
func ParseAckMode(s string) (AckMode, error) {
	switch s {
	case "accept":
		return AckAccept, nil
	case "upstream":
		return AckUpstream, nil
	}
	return 0, fmt.Errorf("fastpath: unknown ack mode %q (want accept or upstream)", s)
}

func (m AckMode) String() string {
	if m == AckUpstream {
		return "upstream"
	}
	return "accept"
}

// Config of the pipeline.
type Config struct {
	// QueueMaxBytes bounds the bytes admitted and not yet finished by every destination, open
	// batches included (-queue.max-bytes, default 256MiB). Requests past it are refused with
	// backpressure and counted in otlpgate_fastpath_refused_items_total{reason="queue_full"}.
	QueueMaxBytes int64
	// BatchMaxBytes seals a batch when the next request would take it past this size
	// (-batch.max-bytes, default 1MiB). A single larger request travels as a batch of its own.
	BatchMaxBytes int
	// BatchMaxItems seals a batch once it holds this many spans, points or records
	// (-batch.max-items, default 8192).
	BatchMaxItems int
	// BatchMaxAge seals a batch this long after its first request (-batch.max-age, default 200ms).
	BatchMaxAge time.Duration
	// Ack is when intakes acknowledge (-ack=accept|upstream, default accept).
	Ack AckMode
	// Eager seals a batch as soon as no sealed batch is still in the destinations' hands, as a
	// group commit does: an idle path adds no batching delay, and batches grow only while the
	// destinations are busy. BatchMaxAge then bounds the wait instead of setting it
	// (-batch.eager, default true).
	Eager bool
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		QueueMaxBytes: 256 << 20,
		BatchMaxBytes: 1 << 20,
		BatchMaxItems: 8192,
		BatchMaxAge:   200 * time.Millisecond,
		Ack:           AckAccept,
		Eager:         true,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.QueueMaxBytes <= 0:
		return errors.New("fastpath: queue max bytes must be positive")
	case c.BatchMaxBytes <= 0:
		return errors.New("fastpath: batch max bytes must be positive")
	case int64(c.BatchMaxBytes) > c.QueueMaxBytes:
		return fmt.Errorf("fastpath: batch max bytes %d exceeds queue max bytes %d", c.BatchMaxBytes, c.QueueMaxBytes)
	case c.BatchMaxItems <= 0:
		return errors.New("fastpath: batch max items must be positive")
	case c.BatchMaxAge <= 0:
		return errors.New("fastpath: batch max age must be positive")
	case c.Ack > AckUpstream:
		return fmt.Errorf("fastpath: bad ack mode %d", c.Ack)
	}
	return nil
}

// ParseDepth reads a scan depth flag value: top, resource or full.
func ParseDepth(s string) (Depth, error) {
	for d := DepthTop; d <= DepthFull; d++ {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("fastpath: unknown scan depth %q (want top, resource or full)", s)
}
