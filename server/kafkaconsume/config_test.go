package kafkaconsume

import (
	"math"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

func TestParseTopics(t *testing.T) {
	f := func(in, enc string, want []Topic, wantErr string) {
		t.Helper()
		got, err := ParseTopics(in, enc)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("ParseTopics(%q): error %v, want one with %q", in, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Errorf("ParseTopics(%q): %v", in, err)
			return
		}
		if len(got) != len(want) {
			t.Errorf("ParseTopics(%q) = %v, want %v", in, got, want)
			return
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("ParseTopics(%q)[%d] = %v, want %v", in, i, got[i], want[i])
			}
		}
	}
	f("", EncodingProto, nil, "")
	f("otlp_spans,otlp_metrics, otlp_logs", EncodingProto, []Topic{{"otlp_spans", fastpath.Traces, false}, {"otlp_metrics", fastpath.Metrics, false}, {"otlp_logs", fastpath.Logs, false}}, "")
	f("otlp_spans", EncodingJSON, []Topic{{"otlp_spans", fastpath.Traces, true}}, "")
	f("team-a.spans:traces:otlp_json,otlp_logs::otlp_proto", EncodingProto, []Topic{{"team-a.spans", fastpath.Traces, true}, {"otlp_logs", fastpath.Logs, false}}, "")
	f("my_spans", EncodingProto, nil, "name its signal")
	f("otlp_spans:spans", EncodingProto, nil, "signal \"spans\"")
	f("otlp_spans:traces:avro", EncodingProto, nil, "encoding \"avro\"")
	f("a:traces:otlp_json:x", EncodingProto, nil, "TOPIC[:SIGNAL[:ENCODING]]")
	f("bad/topic:traces", EncodingProto, nil, "holds")
	f("otlp_spans", "avro", nil, "-kafka.consume.encoding")
}

func TestValidate(t *testing.T) {
	on := func() Config {
		c := DefaultConfig()
		c.Brokers = []string{"127.0.0.1:9092"}
		c.Topics = []Topic{{Name: "otlp_spans"}}
		return c
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the default (off): %v", err)
	}
	if err := on().Validate(); err != nil {
		t.Fatalf("brokers and a topic: %v", err)
	}
	for _, n := range []int{DefaultConfig().MaxRecordBytes, math.MaxInt32} {
		c := on()
		c.MaxBatchBytes = n
		if err := c.Validate(); err != nil {
			t.Errorf("-kafka.consume.max-batch-bytes %d: %v", n, err)
		}
	}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"topics without brokers", func(c *Config) { c.Brokers = nil }, "needs -kafka.consume.brokers"},
		{"no topics", func(c *Config) { c.Topics = nil }, "needs -kafka.consume.topics"},
		{"broker without port", func(c *Config) { c.Brokers = []string{"kafka"} }, "not host:port"},
		{"topic twice", func(c *Config) { c.Topics = append(c.Topics, c.Topics[0]) }, "twice"},
		{"empty group", func(c *Config) { c.Group = "" }, "-kafka.consume.group"},
		{"tiny records", func(c *Config) { c.MaxRecordBytes = 10 }, "max-record-bytes"},
		{"no batch bound", func(c *Config) { c.MaxBatchBytes = 0 }, "-kafka.consume.max-batch-bytes 0 outside"},
		{"negative batch bound", func(c *Config) { c.MaxBatchBytes = -1 }, "-kafka.consume.max-batch-bytes -1 outside"},
		{"batches below records", func(c *Config) { c.MaxBatchBytes = c.MaxRecordBytes - 1 }, "-kafka.consume.max-batch-bytes 16777215 outside"},
		{"batches past the client's bound", func(c *Config) { c.MaxBatchBytes = math.MaxInt32 + 1 }, "-kafka.consume.max-batch-bytes 2147483648 outside"},
		{"tiny buffered bound", func(c *Config) { c.MaxBufferedBytes = 100 }, "-kafka.consume.max-buffered-bytes must be at least 1KiB"},
		{"no queue share", func(c *Config) { c.QueueShare = 0 }, "-kafka.consume.queue-share 0 outside"},
		{"queue share past the queue", func(c *Config) { c.QueueShare = 1.5 }, "-kafka.consume.queue-share 1.5 outside"},
		{"queue share not a number", func(c *Config) { c.QueueShare = math.NaN() }, "-kafka.consume.queue-share NaN outside"},
		{"commit interval", func(c *Config) { c.CommitInterval = 0 }, "commit-interval"},
		{"stall timeout", func(c *Config) { c.StallTimeout = 1e8 /* 100ms */ }, "stall-timeout"},
		{"sasl without user", func(c *Config) { c.SASLMechanism = SASLPlain }, "needs -kafka.consume.sasl.username"},
		{"sasl unknown", func(c *Config) { c.SASLMechanism = "gssapi"; c.SASLUser = "u"; c.SASLPassword = "p" }, "gssapi"},
		{"user without sasl", func(c *Config) { c.SASLUser = "u" }, "needs -kafka.consume.sasl.mechanism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := on()
			tc.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
