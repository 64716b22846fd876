package pipeline

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
)

// otlpgate_fastpath_queue_bytes reads the budget of every live pipeline at scrape time, and a
// closed pipeline leaves the sum once its last byte is finished.
func TestQueueBytesGaugeReadsBudget(t *testing.T) {
	before := testutil.ToFloat64(queueBytes)
	limitBefore := livePipelines.limit()
	r := &recorder{name: "r", hold: true, ok: true}
	p, err := New(testConfig(), []Destination{r})
	if err != nil {
		t.Fatal(err)
	}
	if got := livePipelines.limit() - limitBefore; got != float64(testConfig().QueueMaxBytes) {
		t.Fatalf("otlpgate_fastpath_queue_max_bytes moved by %v, want %d", got, testConfig().QueueMaxBytes)
	}
	body := entry(100, 1)
	for range 3 {
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(queueBytes) - before; got != float64(3*len(body)) {
		t.Fatalf("gauge moved by %v, want %d", got, 3*len(body))
	}
	p.Close() // seals the batch; the recorder holds it
	if got := testutil.ToFloat64(queueBytes) - before; got != float64(3*len(body)) {
		t.Fatalf("after Close the gauge moved by %v, want %d", got, 3*len(body))
	}
	livePipelines.mu.Lock()
	_, live := livePipelines.set[p]
	livePipelines.mu.Unlock()
	if !live {
		t.Fatal("a closed pipeline with bytes in flight left the gauge")
	}
	if n := r.release(true); n != 1 {
		t.Fatalf("released %d batches, want 1", n)
	}
	if got := testutil.ToFloat64(queueBytes) - before; got != 0 {
		t.Fatalf("after the last batch finished the gauge moved by %v, want 0", got)
	}
	livePipelines.mu.Lock()
	_, live = livePipelines.set[p]
	livePipelines.mu.Unlock()
	if live {
		t.Fatal("a closed, drained pipeline is still summed")
	}
}
