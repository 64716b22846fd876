//go:build unix

package filedest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// TestFileModes writes through a real pipeline into a file in a directory the destination
// creates, past a rotation, and checks the modes of the directory, the file and its rotation:
// the owner's only by default, the group's to read with GroupReadable, whatever the umask
// (the process's: no test here runs in parallel).
func TestFileModes(t *testing.T) {
	for _, tc := range []struct {
		group           bool
		umask           int
		fileMode, dMode os.FileMode
	}{
		{false, 0o022, 0o600, 0o700},
		{false, 0, 0o600, 0o700},
		{true, 0o022, 0o640, 0o750},
		{true, 0o077, 0o640, 0o750},
	} {
		dir := filepath.Join(t.TempDir(), "sub")
		cfg := DefaultConfig()
		cfg.Path = filepath.Join(dir, "otlp.jsonl")
		cfg.MaxBytes = 150 // one line of about 96 bytes a file: the second rotates
		cfg.SummaryInterval = 0
		cfg.GroupReadable = tc.group
		old := syscall.Umask(tc.umask)
		writeSpans(t, cfg, 3)
		syscall.Umask(old)
		for _, p := range []string{dir, cfg.Path, cfg.Path + ".1"} {
			want := tc.fileMode
			if p == dir {
				want = tc.dMode
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != want {
				t.Errorf("group-readable=%v umask %03o: %s has mode %04o, want %04o", tc.group, tc.umask, filepath.Base(p), got, want)
			}
		}
	}
}

// writeSpans sends n one-span requests, one batch each, through a pipeline into a destination
// of cfg, and shuts it down.
func writeSpans(t *testing.T, cfg Config, n int) {
	t.Helper()
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
}
