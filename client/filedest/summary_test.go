package filedest

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// lockedBuffer is a log sink the writer goroutine and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) summaries() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), `msg="file destination"`)
}

// An idle file destination's summary ticker does not run: it starts with the first batch
// written, logs one summary an interval while batches come, and stops at the first tick that
// finds nothing new, until the next batch.
func TestSummaryTickerSleepsWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs lockedBuffer
		cfg := DefaultConfig()
		cfg.Path = filepath.Join(t.TempDir(), "otlp.jsonl")
		d, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		pc := pipeline.DefaultConfig()
		pc.BatchMaxItems = 1
		p, err := pipeline.New(pc, []pipeline.Destination{d})
		if err != nil {
			t.Fatal(err)
		}
		send := func(name string) {
			req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
				Spans: []*tracev1.Span{{Name: name, TraceId: []byte{1}, SpanId: []byte{2}}}}}}}}
			body, _ := req.MarshalVT()
			if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
				t.Fatal(err)
			}
		}
		idle := func(d time.Duration) {
			time.Sleep(d)
			synctest.Wait()
		}

		idle(time.Hour)
		if n, s := d.summaryTicks.Load(), logs.summaries(); n != 0 || s != 0 {
			t.Fatalf("an hour idle before any batch: %d ticks, %d summaries; want none", n, s)
		}
		send("a")
		idle(cfg.SummaryInterval + time.Millisecond)
		send("b")
		idle(cfg.SummaryInterval)
		if s := logs.summaries(); s != 2 {
			t.Fatalf("%d summaries over two intervals with a batch in each, want 2", s)
		}
		idle(time.Hour)
		if n, s := d.summaryTicks.Load(), logs.summaries(); n != 3 || s != 2 {
			t.Fatalf("after an idle hour: %d ticks, %d summaries; want 3 ticks (the last finding nothing new) and 2 summaries", n, s)
		}
		send("c")
		idle(cfg.SummaryInterval + time.Millisecond)
		if n, s := d.summaryTicks.Load(), logs.summaries(); n != 4 || s != 3 {
			t.Fatalf("a batch after idling: %d ticks, %d summaries; want 4 and 3", n, s)
		}
		p.Close()
		if err := d.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
