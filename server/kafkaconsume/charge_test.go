package kafkaconsume

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// charging is an Admitter that notes what the intake limiter held for the consumer while each
// request was admitted.
type charging struct {
	lim   *admission.Limiter
	held  []int64
	items int
	body  int
}

func (a *charging) AdmitDelivered(req pipeline.Request) (*pipeline.Batch, error) {
	a.held = append(a.held, a.lim.BytesFor(admission.IntakeKafkaConsume))
	a.items += req.Items
	a.body = len(req.Body)
	return nil, nil
}

func (a *charging) RetryDelay() time.Duration { return time.Millisecond }

func (a *charging) Fill() (int64, int64) { return 0, 0 }

// chargedHandler is a consumer of OTLP/JSON records with an intake limiter of 1MiB.
func chargedHandler(t *testing.T) (*Consumer, *partition, *charging) {
	t.Helper()
	lc := admission.DefaultLimiterConfig()
	lc.MaxBytes, lc.MaxConnBytes, lc.UnauthenticatedMaxBytes, lc.InflateMaxBytes = 1<<20, 1<<20, 1<<20, 1<<20
	in := &charging{lim: admission.NewLimiter(lc)}
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:9092"}
	cfg.Topics = []Topic{{Name: "otlp_spans", Signal: fastpath.Traces, JSON: true}}
	cfg.Limiter = in.lim
	c, err := New(cfg, in, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c.pollCtx, c.stopPoll = context.WithCancel(context.Background())
	t.Cleanup(c.stopPoll)
	return c, c.partitionOf("otlp_spans", 0, 0, 0), in
}

// An OTLP/JSON record's protobuf form is charged to the intake limiter while it is admitted,
// as the HTTP intake's transcoding output is, and given back once it was.
func TestJSONOutputCharged(t *testing.T) {
	c, p, in := chargedHandler(t)
	_, js := spansRecord(t, 100)
	for i, r := range recordsOf(js, 3) {
		if got := c.handle(p, r); got != handleDone {
			t.Fatalf("record %d: handled %d", i, got)
		}
		if n := in.lim.BytesFor(admission.IntakeKafkaConsume); n != 0 {
			t.Fatalf("record %d: the limiter holds %d bytes after it was admitted", i, n)
		}
	}
	if in.items != 300 || len(in.held) != 3 {
		t.Fatalf("%d items in %d requests admitted, want 300 in 3", in.items, len(in.held))
	}
	for i, h := range in.held {
		if h < int64(in.body) {
			t.Errorf("request %d of %d bytes admitted while the limiter held %d for it", i, in.body, h)
		}
	}
}

// A record whose protobuf form the limiter has no room for now waits, polling nothing, until
// there is room; then it is admitted whole.
func TestJSONOutputWaitsForRoom(t *testing.T) {
	c, p, in := chargedHandler(t)
	_, js := spansRecord(t, 100)
	// Everything but 4KiB of the shared budget is held by another intake.
	taken := int64(1<<20 - 4<<10)
	if !in.lim.TryAcquireBytes(admission.IntakeHTTP, taken) {
		t.Fatal("could not take the budget")
	}
	waits := testutil.ToFloat64(backpressure)
	done := make(chan handled, 1)
	go func() { done <- c.handle(p, recordsOf(js, 1)[0]) }()
	for i := 0; testutil.ToFloat64(backpressure) == waits; i++ {
		if i == 5000 {
			t.Fatal("the record never waited for room")
		}
		time.Sleep(time.Millisecond)
	}
	if len(in.held) != 0 {
		t.Fatal("admitted without room")
	}
	in.lim.ReleaseBytes(admission.IntakeHTTP, taken)
	if got := <-done; got != handleDone || in.items != 100 {
		t.Fatalf("handled %d with %d items admitted, want done with 100", got, in.items)
	}
	if n := in.lim.BytesFor(admission.IntakeKafkaConsume); n != 0 {
		t.Fatalf("the limiter holds %d bytes after the record was admitted", n)
	}
}

// A record whose protobuf form is larger than the limiter's whole budget can never be admitted:
// it is skipped as too large, not waited on for ever, and holds nothing.
func TestJSONOutputPastBudgetSkipped(t *testing.T) {
	c, p, in := chargedHandler(t)
	proto, js := spansRecord(t, 8000)
	if len(proto) <= 1<<20 {
		t.Fatalf("a protobuf form of %d bytes fits the budget", len(proto))
	}
	skipped := testutil.ToFloat64(skippedC[skipTooLarge])
	if got := c.handle(p, recordsOf(js, 1)[0]); got != handleDone {
		t.Fatalf("handled %d", got)
	}
	if n := testutil.ToFloat64(skippedC[skipTooLarge]) - skipped; n != 1 || len(in.held) != 0 {
		t.Fatalf("%v skipped as too large, %d admitted; want 1 skipped", n, len(in.held))
	}
	if n := in.lim.BytesFor(admission.IntakeKafkaConsume); n != 0 {
		t.Fatalf("the limiter holds %d bytes after the record was skipped", n)
	}
	if p.acked != 1 {
		t.Fatalf("acked up to %d, want past the skipped record", p.acked)
	}
}
