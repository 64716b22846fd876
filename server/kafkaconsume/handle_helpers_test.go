package kafkaconsume

import (
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// durable is an Admitter that takes every request as the spool's admission does: durable at
// once, nothing to wait for. It counts what it took.
type durable struct{ n, items int }

func (d *durable) AdmitDelivered(req pipeline.Request) (*pipeline.Batch, error) {
	d.n++
	d.items += req.Items
	return nil, nil
}

func (d *durable) RetryDelay() time.Duration { return time.Millisecond }

func (d *durable) Fill() (int64, int64) { return 0, 0 }

// handler is a consumer with no client, for driving handle directly.
func handler(t testing.TB, in Admitter, json bool) (*Consumer, *partition) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:9092"}
	cfg.Topics = []Topic{{Name: "otlp_spans", Signal: fastpath.Traces, JSON: json}}
	c, err := New(cfg, in, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return c, c.partitionOf("otlp_spans", 0, 0, 0)
}

// recordsOf is n records of value at offsets 0..n-1.
func recordsOf(value []byte, n int) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: "otlp_spans", Offset: int64(i), Value: value}
	}
	return rs
}
