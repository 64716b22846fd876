package kafka

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// TestPushErrors drives every way a push can fail over TCP and checks the exact code, that
// nothing was forwarded, and the one counter that must record it.
func TestPushErrors(t *testing.T) {
	valid := func(t testing.TB) []byte {
		b, err := testMetrics("a.gauge", "a.sum").MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bigZstd := func(t testing.TB) []byte {
		names := make([]string, 200)
		for i := range names {
			names[i] = "org.apache.kafka.producer.some.long.metric.name"
		}
		return zstdPayload(t, testMetrics(names...)) // well over 1 KiB once decompressed
	}
	consumeErr := errors.New("downstream broke")

	type pushArgs struct {
		id          [16]byte
		subID       int32
		codec       int8
		payload     []byte
		terminating bool
	}
	cases := []struct {
		name string
		// prepare may push first (on the same instance) and returns the push under test.
		prepare func(t *testing.T, c *client, clk *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs
		code    int16
		counter prometheus.Collector
	}{
		{"zero instance id", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.id = [16]byte{}
			return p
		}, errInvalidRequest, errInvalidInstance},
		{"reserved instance id", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.id = [16]byte{15: 1}
			return p
		}, errInvalidRequest, errInvalidInstance},
		{"unknown instance", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.id = newID()
			return p
		}, errUnknownSubscriptionID, unknownSubscriptionRequests},
		{"push after terminating", func(t *testing.T, c *client, clk *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			if code := c.push(p.id, p.subID, p.codec, p.payload, true); code != errNone {
				t.Fatalf("terminating push: %d", code)
			}
			clk.Advance(2 * time.Second)
			return p
		}, errInvalidRequest, errAfterTerminating},
		{"too early", func(t *testing.T, c *client, clk *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			if code := c.push(p.id, p.subID, p.codec, p.payload, false); code != errNone {
				t.Fatalf("first push: %d", code)
			}
			clk.Advance(999 * time.Millisecond)
			return p
		}, errThrottlingQuotaExceeded, throttledPushes},
		{"too early beats unsupported codec", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			if code := c.push(p.id, p.subID, p.codec, p.payload, false); code != errNone {
				t.Fatalf("first push: %d", code)
			}
			p.codec = 9
			return p
		}, errThrottlingQuotaExceeded, throttledPushes},
		{"stale subscription id", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.subID++
			return p
		}, errUnknownSubscriptionID, unknownSubscriptionRequests},
		{"stale subscription beats unsupported codec", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.subID++
			p.codec = 9
			return p
		}, errUnknownSubscriptionID, unknownSubscriptionRequests},
		{"unknown codec", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.codec = 5
			return p
		}, errUnsupportedCompressionType, errUnsupportedCodec},
		{"negative codec", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.codec = -1
			return p
		}, errUnsupportedCompressionType, errUnsupportedCodec},
		{"compressed over the limit", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.payload = make([]byte, 1025)
			return p
		}, errTelemetryTooLarge, errTooLarge},
		{"decompressed over the limit", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.codec, p.payload = 4, bigZstd(t)
			if len(p.payload) > 1024 {
				t.Fatalf("compressed test payload is %d bytes, must fit the limit", len(p.payload))
			}
			return p
		}, errTelemetryTooLarge, errTooLarge},
		{"not protobuf", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.payload = []byte{0xff, 0xff, 0xff}
			return p
		}, errInvalidRecord, errInvalidRecordMetric},
		{"protobuf but not MetricsData", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.payload = []byte{0x10, 0x01} // field 2, varint
			return p
		}, errInvalidRecord, errInvalidRecordMetric},
		{"corrupt zstd", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.codec, p.payload = 4, []byte{0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3, 4, 5, 6}
			return p
		}, errInvalidRecord, errCorruptCompression},
		{"pipeline full", func(t *testing.T, c *client, _ *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs {
			rec.SetErr(pipeline.ErrFull)
			return p
		}, errThrottlingQuotaExceeded, errQueueFull},
		// Backpressure of the spool and of the intake limiter is counted by its cause, under
		// the reason the pipeline counts it by.
		{"spool full", func(t *testing.T, c *client, _ *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs {
			rec.SetErr(pipeline.ErrSpoolFull)
			return p
		}, errThrottlingQuotaExceeded, errSpoolFull},
		{"spool cannot write", func(t *testing.T, c *client, _ *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs {
			rec.SetErr(pipeline.ErrSpoolIO)
			return p
		}, errThrottlingQuotaExceeded, errSpoolIO},
		{"no intake room for what processing writes", func(t *testing.T, c *client, _ *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs {
			rec.SetErr(pipeline.ErrBudget)
			return p
		}, errThrottlingQuotaExceeded, errIntakeBusy},
		{"pipeline refuses the size", func(t *testing.T, c *client, _ *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs {
			rec.SetErr(pipeline.ErrTooLarge)
			return p
		}, errTelemetryTooLarge, errQueueTooLarge},
		{"pipeline error", func(t *testing.T, c *client, _ *testkit.Clock, rec *testkit.Recorder, p pushArgs) pushArgs {
			rec.SetErr(consumeErr)
			return p
		}, errUnknownServerError, errConsume},
		{"empty payload is accepted", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			p.payload = nil
			return p
		}, errNone, emptyPushes},
		{"valid push", func(t *testing.T, c *client, _ *testkit.Clock, _ *testkit.Recorder, p pushArgs) pushArgs {
			return p
		}, errNone, exportedPushes},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TelemetryMaxBytes = 1024
			cfg.MaxRequestBytes = 64 << 10
			rec := &testkit.Recorder{}
			s, clk := startServer(t, cfg, rec)
			c := dial(t, s, "errors")
			sub := c.get([16]byte{})
			p := tc.prepare(t, c, clk, rec, pushArgs{id: sub.ClientInstanceID, subID: sub.SubscriptionID, payload: valid(t)})
			forwarded := rec.Count()
			before := counterValue(t, tc.counter)
			if code := c.push(p.id, p.subID, p.codec, p.payload, p.terminating); code != tc.code {
				t.Fatalf("code %d, want %d", code, tc.code)
			}
			if got := counterValue(t, tc.counter) - before; got != 1 {
				t.Fatalf("counter moved by %v, want 1", got)
			}
			wantForwarded := forwarded
			if tc.counter == exportedPushes {
				wantForwarded++
			}
			if rec.Count() != wantForwarded {
				t.Fatalf("%d payloads forwarded, want %d", rec.Count(), wantForwarded)
			}
		})
	}
}

// tracesOnly is a destination that takes traces only, as a -dest with signals=traces.
type tracesOnly struct{ *testkit.Recorder }

func (tracesOnly) Signals() fastpath.SignalSet { return 1 << fastpath.Traces }

// With no destination that takes metrics (-dest signals=traces) from the start, a client is
// subscribed to no metrics, so it pushes nothing that would only be refused; a client that
// pushes anyway under that subscription gets nothing forwarded and no failure.
func TestSubscriptionEmptyWhenMetricsUnserved(t *testing.T) {
	rec := &testkit.Recorder{}
	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{tracesOnly{rec}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, _ := startServer(t, testConfig(), p)
	c := dial(t, s, "unserved")
	sub := c.get([16]byte{})
	if sub.ErrorCode != errNone {
		t.Fatalf("GetTelemetrySubscriptions error %d", sub.ErrorCode)
	}
	if len(sub.RequestedMetrics) != 0 {
		t.Fatalf("requested metrics %q with no destination for metrics, want none", sub.RequestedMetrics)
	}
	if sub.PushIntervalMillis <= 0 {
		t.Fatalf("push interval %d: the client must be told when to ask again", sub.PushIntervalMillis)
	}
	payload, err := testMetrics("a.gauge", "a.sum").MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	failed, exported := counterValue(t, errConsume), counterValue(t, exportedPushes)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
		t.Fatalf("push under the empty subscription: code %d, want %d", code, errNone)
	}
	if d := counterValue(t, errConsume) - failed; d != 0 {
		t.Errorf("pushes refused as consume_error: %v, want 0", d)
	}
	if d := counterValue(t, exportedPushes) - exported; d != 0 {
		t.Errorf("pushes exported: %v, want 0", d)
	}
	p.Close()
	if n := rec.Count(); n != 0 {
		t.Errorf("destination got %d batches, want none", n)
	}
}

// switchable is a consumer whose destinations for metrics come and go, as a reload of -dest
// or -dest.file with signals= changes them; refuse makes Consume answer ErrUnserved while
// Serves still says yes (a reload between the push's checks and its admission).
type switchable struct {
	*testkit.Recorder
	served, refuse atomic.Bool
}

func (s *switchable) Serves(sig fastpath.Signal) bool {
	return sig == fastpath.Metrics && s.served.Load()
}

func (s *switchable) Consume(req pipeline.Request) error {
	if s.refuse.Load() || !s.Serves(req.Signal) {
		return pipeline.ErrUnserved
	}
	return s.Recorder.Consume(req)
}

// When the destinations stop taking metrics, a client still pushing under its old subscription
// is told UNKNOWN_SUBSCRIPTION_ID, and its re-fetch subscribes it to none; when a destination
// takes metrics again, the next fetch subscribes it again and its pushes are forwarded.
func TestSubscriptionFollowsServedMetrics(t *testing.T) {
	next := &switchable{Recorder: &testkit.Recorder{}}
	next.served.Store(true)
	s, clk := startServer(t, testConfig(), next)
	c := dial(t, s, "switch")
	payload, err := testMetrics("a.gauge").MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	sub := c.get([16]byte{})
	if len(sub.RequestedMetrics) == 0 {
		t.Fatal("subscribed to no metrics while metrics have a destination")
	}
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
		t.Fatalf("push: code %d", code)
	}
	if next.Count() != 1 {
		t.Fatalf("%d pushes forwarded, want 1", next.Count())
	}

	emptied, stale := counterValue(t, unservedSets), counterValue(t, unknownSubscriptionRequests)
	next.served.Store(false)
	clk.Advance(time.Duration(sub.PushIntervalMillis) * time.Millisecond)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errUnknownSubscriptionID {
		t.Fatalf("push under the old subscription once metrics lost their destination: code %d, want %d", code, errUnknownSubscriptionID)
	}
	if d := counterValue(t, unservedSets) - emptied; d != 1 {
		t.Errorf("subscriptions emptied %v times, want 1", d)
	}
	if d := counterValue(t, unknownSubscriptionRequests) - stale; d != 1 {
		t.Errorf("pushes under a stale subscription: %v, want 1", d)
	}
	again := c.get(sub.ClientInstanceID)
	if len(again.RequestedMetrics) != 0 || again.SubscriptionID == sub.SubscriptionID {
		t.Fatalf("re-fetch: requested %q, subscription %d (old %d): want none, and a new id", again.RequestedMetrics, again.SubscriptionID, sub.SubscriptionID)
	}

	next.served.Store(true)
	back := c.get(sub.ClientInstanceID)
	if len(back.RequestedMetrics) == 0 || back.SubscriptionID == again.SubscriptionID {
		t.Fatalf("fetch once metrics have a destination again: requested %q, subscription %d", back.RequestedMetrics, back.SubscriptionID)
	}
	if code := c.push(sub.ClientInstanceID, back.SubscriptionID, 0, payload, false); code != errNone {
		t.Fatalf("push after resubscribing: code %d", code)
	}
	if next.Count() != 2 {
		t.Fatalf("%d pushes forwarded, want 2", next.Count())
	}

	// Refused as unserved at admission although the check before said yes: counted as
	// unserved, and answered so that the client fetches again at once.
	next.refuse.Store(true)
	clk.Advance(time.Duration(back.PushIntervalMillis) * time.Millisecond)
	unserved, failed := counterValue(t, errUnserved), counterValue(t, errConsume)
	if code := c.push(sub.ClientInstanceID, back.SubscriptionID, 0, payload, false); code != errUnknownSubscriptionID {
		t.Fatalf("push refused as unserved: code %d, want %d", code, errUnknownSubscriptionID)
	}
	if d := counterValue(t, errUnserved) - unserved; d != 1 {
		t.Errorf("pushes refused as unserved: %v, want 1", d)
	}
	if d := counterValue(t, errConsume) - failed; d != 0 {
		t.Errorf("pushes refused as consume_error: %v, want 0", d)
	}
}

func counterValue(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// TestPushUnknownInstanceRecreated checks that the instance a push did not know is re-created
// under the client's id, so the immediate re-fetch and push succeed.
func TestPushUnknownInstanceRecreated(t *testing.T) {
	rec := &testkit.Recorder{}
	s, _ := startServer(t, testConfig(), rec)
	c := dial(t, s, "restarted")
	id := newID()
	payload, _ := testMetrics("m").MarshalVT()
	created := counterValue(t, instancesCreated)
	if code := c.push(id, 12345, 0, payload, false); code != errUnknownSubscriptionID {
		t.Fatalf("code %d", code)
	}
	if s.reg.len() != 1 || counterValue(t, instancesCreated)-created != 1 {
		t.Fatalf("instance not re-created: %d instances", s.reg.len())
	}
	sub := c.get(id)
	if sub.ClientInstanceID != id {
		t.Fatalf("re-fetch gave id %x, want %x", sub.ClientInstanceID, id)
	}
	if code := c.push(id, sub.SubscriptionID, 0, payload, false); code != errNone {
		t.Fatalf("push after re-fetch: code %d", code)
	}
	if rec.Count() != 1 {
		t.Fatalf("%d payloads forwarded", rec.Count())
	}
}

// TestPushAllFiltered: a push none of whose metrics is subscribed sends nothing downstream.
func TestPushAllFiltered(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultMetrics = []string{"org.apache.kafka.consumer."}
	rec := &testkit.Recorder{}
	s, _ := startServer(t, cfg, rec)
	c := dial(t, s, "filtered")
	sub := c.get([16]byte{})
	payload, _ := testMetrics("org.apache.kafka.producer.x", "org.apache.kafka.producer.y").MarshalVT()
	before := counterValue(t, emptyPushes)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
		t.Fatalf("code %d", code)
	}
	if rec.Count() != 0 || counterValue(t, emptyPushes)-before != 1 {
		t.Fatalf("forwarded %d, empty pushes +%v", rec.Count(), counterValue(t, emptyPushes)-before)
	}
}
