package filedest

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// Batches go through a real pipeline into the file; the file rotates by size, keeping
// MaxBackups old files, and every batch is one line in exactly one of them.
func TestWriteAndRotate(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Path = filepath.Join(dir, "sub", "otlp.jsonl")
	cfg.MaxBytes = 300 // three lines of about 96 bytes a file: 12 lines need four files
	cfg.MaxBackups = 2
	cfg.SummaryInterval = 0
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	pc.BatchMaxAge = time.Hour
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
			Spans: []*tracev1.Span{{Name: "span-" + string(rune('a'+i)), TraceId: []byte{byte(i)}, SpanId: []byte{0xab}}}}}}}}
		body, _ := req.MarshalVT()
		if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, name := range []string{"otlp.jsonl.2", "otlp.jsonl.1", "otlp.jsonl"} {
		ls := lines(t, filepath.Join(dir, "sub", name))
		if len(ls) == 0 {
			t.Fatalf("%s is empty or missing", name)
		}
		if st, _ := os.Stat(filepath.Join(dir, "sub", name)); st.Size() > cfg.MaxBytes {
			t.Errorf("%s is %d bytes > max %d", name, st.Size(), cfg.MaxBytes)
		}
		all = append(all, ls...)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "otlp.jsonl.3")); !os.IsNotExist(err) {
		t.Fatalf("a third backup exists: %v", err)
	}
	// The oldest lines were rotated away; the kept ones are the newest, in order.
	last := all[len(all)-1]
	if !strings.Contains(last, `"name":"span-l"`) || !strings.Contains(last, `"spanId":"ab"`) {
		t.Fatalf("last line %s", last)
	}
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] && !strings.Contains(all[i], "span-") {
			t.Fatalf("lines out of order")
		}
	}
	if len(all) >= n {
		t.Fatalf("%d lines kept of %d: nothing was rotated away", len(all), n)
	}
}

// A full queue refuses batches instead of growing, and Shutdown counts what it cannot write.
func TestQueueBound(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "otlp.jsonl")
	cfg.QueueBytes = 1
	cfg.SummaryInterval = 0
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = time.Hour
	p, _ := pipeline.New(pc, []pipeline.Destination{d})
	p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: []byte{0x0a, 0x00}, Items: 0})
	p.Close()
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d: a refused hand-over must settle the budget", q)
	}
	if ls := lines(t, cfg.Path); len(ls) != 0 {
		t.Fatalf("a batch larger than the queue was written: %v", ls)
	}
}
