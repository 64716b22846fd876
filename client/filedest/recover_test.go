package filedest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// faultFS is the real file system with failures on demand, and a log of what the destination
// did, in order: every write (with the span names of the lines it carried) and every batch it
// finished (recorded by finisher).
type faultFS struct {
	osFS
	mu         sync.Mutex
	events     []string
	failOpen   int  // the next failOpen OpenFile calls fail
	failRename int  // the next failRename renames of the file itself fail
	failWrite  int  // the next failWrite writes fail with ENOSPC
	partial    bool // a failing write first writes half its bytes
	gate       chan struct{}
	entered    chan struct{}
	// seeIn, when set, is read by another descriptor at every Done(true): the line must be
	// there already, as a process reading the file (or the file after a SIGKILL) would see it.
	seeIn  string
	unseen []string
}

var spanName = regexp.MustCompile(`"name":"([^"]+)"`)

func (fs *faultFS) record(e string) {
	fs.mu.Lock()
	fs.events = append(fs.events, e)
	fs.mu.Unlock()
}

func (fs *faultFS) log() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.events)
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	fs.mu.Lock()
	fail := fs.failOpen > 0
	if fail {
		fs.failOpen--
	}
	fs.mu.Unlock()
	if fail {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EIO}
	}
	f, err := fs.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: f, fs: fs}, nil
}

func (fs *faultFS) Rename(oldpath, newpath string) error {
	fs.mu.Lock()
	fail := fs.failRename > 0 && strings.HasSuffix(newpath, ".1")
	if fail {
		fs.failRename--
	}
	fs.mu.Unlock()
	if fail {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EIO}
	}
	return fs.osFS.Rename(oldpath, newpath)
}

type faultFile struct {
	file
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	fs := f.fs
	fs.mu.Lock()
	gate := fs.gate
	fs.gate = nil
	fail := fs.failWrite > 0
	if fail {
		fs.failWrite--
	}
	partial := fs.partial
	fs.mu.Unlock()
	if gate != nil {
		fs.entered <- struct{}{}
		<-gate
	}
	var names []string
	for _, m := range spanName.FindAllSubmatch(p, -1) {
		names = append(names, string(m[1]))
	}
	if !fail {
		fs.record("write " + strings.Join(names, " "))
		return f.file.Write(p)
	}
	n := 0
	if partial {
		n, _ = f.file.Write(p[:len(p)/2])
	}
	fs.record(fmt.Sprintf("fail %s", strings.Join(names, " ")))
	return n, &os.PathError{Op: "write", Path: "otlp.jsonl", Err: syscall.ENOSPC}
}

// finisher records, in fs's log, each batch the destination finishes, then finishes it.
func finisher(fs *faultFS) func(*pipeline.Batch, bool) {
	return func(b *pipeline.Batch, ok bool) {
		var req coltracev1.ExportTraceServiceRequest
		name := "?"
		if req.UnmarshalVT(b.Payload.Bytes()) == nil {
			name = req.ResourceSpans[0].ScopeSpans[0].Spans[0].Name
		}
		if fs.seeIn != "" && ok {
			if data, err := os.ReadFile(fs.seeIn); err != nil || !strings.Contains(string(data), `"name":"`+name+`"`) {
				fs.mu.Lock()
				fs.unseen = append(fs.unseen, name)
				fs.mu.Unlock()
			}
		}
		fs.record(fmt.Sprintf("done %s %v", name, ok))
		b.Done(ok)
	}
}

// rig is a file destination on fs behind a pipeline that seals every request as its own batch.
type rig struct {
	t    *testing.T
	fs   *faultFS
	d    *Dest
	p    *pipeline.Pipeline
	path string
}

func newRig(t *testing.T, maxBytes int64, backups int) *rig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "otlp.jsonl")
	cfg.MaxBytes, cfg.MaxBackups, cfg.SummaryInterval = maxBytes, backups, 0
	fs := &faultFS{}
	d, err := newDest(cfg, nil, fs)
	if err != nil {
		t.Fatal(err)
	}
	d.finish = finisher(fs)
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	pc.BatchMaxAge = time.Hour
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, fs: fs, d: d, p: p, path: cfg.Path}
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	if r.p == nil {
		return
	}
	r.p.Close()
	if err := r.d.Shutdown(context.Background()); err != nil {
		r.t.Error(err)
	}
	r.p = nil
}

// spanRequest is the request of one span named name that send hands the destination.
func spanRequest(name string) *coltracev1.ExportTraceServiceRequest {
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
		Spans: []*tracev1.Span{{Name: name, TraceId: []byte{1}, SpanId: []byte{2}}}}}}}}
}

// send hands the destination one batch of one span named name.
func (r *rig) send(name string) {
	r.t.Helper()
	body, _ := spanRequest(name).MarshalVT()
	if err := r.p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
		r.t.Fatal(err)
	}
}

// sendHeld sends one batch whose write hangs until release is called, and returns once the
// write began.
func (r *rig) sendHeld(name string) (release func()) {
	r.t.Helper()
	gate := make(chan struct{})
	r.fs.mu.Lock()
	r.fs.gate, r.fs.entered = gate, make(chan struct{}, 1)
	r.fs.mu.Unlock()
	r.send(name)
	select {
	case <-r.fs.entered:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("the write of %s never came", name)
	}
	return func() { close(gate) }
}

// sendDone sends one batch and waits until the destination finished it. It runs in a synctest
// bubble: once every goroutine of the rig waits, the destination has written (or failed to
// write) the batch and finished it.
func (r *rig) sendDone(name string) {
	r.t.Helper()
	r.send(name)
	synctest.Wait()
	if !slices.ContainsFunc(r.fs.log(), func(e string) bool { return strings.HasPrefix(e, "done "+name+" ") }) {
		r.t.Fatalf("%s not finished once the destination waited for more: %v", name, r.fs.log())
	}
}

// names returns the span names of the lines of a file, in order; every line must be whole JSON.
func names(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, l := range lines(t, path) {
		m := spanName.FindStringSubmatch(l)
		if m == nil || !strings.HasPrefix(l, "{") || !strings.HasSuffix(l, "}") {
			t.Errorf("%s: broken line %q", filepath.Base(path), l)
			continue
		}
		out = append(out, m[1])
	}
	return out
}

func failed(reason string) int { return int(testutil.ToFloat64(failedItems.WithLabelValues(reason))) }

// A batch is finished as delivered only after the write that carried its line: t0 is written
// alone; t1..t3, queued while that write was under way, go out together in one write, and only
// then are they finished, in order.
func TestDoneOnlyAfterWrite(t *testing.T) {
	r := newRig(t, 1<<20, 1)
	r.fs.seeIn = r.path
	release := r.sendHeld("t0")
	r.send("t1")
	r.send("t2")
	r.send("t3")
	ev := r.fs.log()
	release()
	if len(ev) != 0 {
		t.Fatalf("before the first write returned: %v", ev)
	}
	r.close()
	want := []string{"write t0", "done t0 true", "write t1 t2 t3", "done t1 true", "done t2 true", "done t3 true"}
	if got := r.fs.log(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if got := names(t, r.path); !slices.Equal(got, []string{"t0", "t1", "t2", "t3"}) {
		t.Errorf("file holds %v", got)
	}
	if len(r.fs.unseen) > 0 {
		t.Errorf("finished as delivered before the file held them: %v", r.fs.unseen)
	}
}

// A full disk fails writes; each failed batch is counted and finished as not delivered, a
// half-written line is cut off, and once the disk has room again the destination writes on its
// own: the file holds exactly the batches that were reported delivered, each line whole.
func TestRecoversAfterWriteErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1<<20, 1)
		before := failed("write")
		r.sendDone("t0")
		r.fs.mu.Lock()
		r.fs.failWrite = 1
		r.fs.mu.Unlock()
		r.sendDone("t1")
		r.fs.mu.Lock()
		r.fs.failWrite, r.fs.partial = 1, true
		r.fs.mu.Unlock()
		r.sendDone("t2")
		r.sendDone("t3")
		r.sendDone("t4")
		r.close()
		want := []string{
			"write t0", "done t0 true",
			"fail t1", "done t1 false",
			"fail t2", "done t2 false",
			"write t3", "done t3 true",
			"write t4", "done t4 true",
		}
		if got := r.fs.log(); !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
		if got := names(t, r.path); !slices.Equal(got, []string{"t0", "t3", "t4"}) {
			t.Errorf("file holds %v, want [t0 t3 t4]", got)
		}
		if n := failed("write") - before; n != 2 {
			t.Errorf("%d items counted as not written, want 2", n)
		}
	})
}

// A failed rename leaves the line in the current file (nothing is lost; the next rotation
// succeeds), and a file that cannot be opened costs the batches of that moment only, counted:
// the next batch opens it.
func TestRecoversAfterRenameAndOpenErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 150, 3) // lines of about 100 bytes: every line after the first rotates
		before := failed("open")
		r.sendDone("t0")
		r.fs.mu.Lock()
		r.fs.failRename = 1
		r.fs.mu.Unlock()
		r.sendDone("t1") // rename fails: t1 goes after t0
		r.sendDone("t2") // rotates [t0 t1] away
		r.fs.mu.Lock()
		r.fs.failOpen = 2 // after the rotation, and once more when the burst is written
		r.fs.mu.Unlock()
		r.sendDone("t3")
		r.sendDone("t4")
		r.close()
		for name, want := range map[string][]string{
			"otlp.jsonl.2": {"t0", "t1"},
			"otlp.jsonl.1": {"t2"},
			"otlp.jsonl":   {"t4"},
		} {
			if got := names(t, filepath.Join(filepath.Dir(r.path), name)); !slices.Equal(got, want) {
				t.Errorf("%s holds %v, want %v", name, got, want)
			}
		}
		if _, err := os.Stat(r.path + ".3"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("otlp.jsonl.3: %v", err)
		}
		if n := failed("open") - before; n != 1 {
			t.Errorf("%d items counted as not opened, want 1", n)
		}
		want := []string{"write t0", "done t0 true", "write t1", "done t1 true", "write t2", "done t2 true",
			"done t3 false", "write t4", "done t4 true"}
		if got := r.fs.log(); !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
	})
}

// destGauge is the value of the client gauge metric (otlpgate_client_queue_bytes,
// otlpgate_client_in_flight_requests) for the destination name; -1 when it has no series.
func destGauge(t *testing.T, metric, name string) float64 {
	t.Helper()
	v, n := testkit.Gauge(t, metric, "destination", name)
	if n == 0 {
		return -1
	}
	return v
}

// What the file destination holds is on the client's gauges, as a network destination's is:
// while a write hangs on the disk, otlpgate_client_queue_bytes is every byte of the batch being
// written and of those queued behind it, and otlpgate_client_in_flight_requests the batches
// of the write; both go back to 0 once they are written, and the series leave with the
// destination. The status page reads these to show a destination stuck on its disk as down.
func TestHeldBytesOnTheClientGauges(t *testing.T) {
	r := newRig(t, 1<<20, 1)
	release := r.sendHeld("t0")
	r.send("t1")
	r.send("t2")
	want := float64(spanRequest("t0").SizeVT() + spanRequest("t1").SizeVT() + spanRequest("t2").SizeVT())
	deadline := time.Now().Add(30 * time.Second)
	for destGauge(t, "otlpgate_client_queue_bytes", "file") != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := destGauge(t, "otlpgate_client_queue_bytes", "file"); got != want {
		t.Errorf("otlpgate_client_queue_bytes %v while t0's write hangs with t1 and t2 queued, want %v", got, want)
	}
	if got := destGauge(t, "otlpgate_client_in_flight_requests", "file"); got != 1 {
		t.Errorf("otlpgate_client_in_flight_requests %v while t0's write hangs, want 1", got)
	}
	release()
	for destGauge(t, "otlpgate_client_queue_bytes", "file") != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if b, n := destGauge(t, "otlpgate_client_queue_bytes", "file"), destGauge(t, "otlpgate_client_in_flight_requests", "file"); b != 0 || n != 0 {
		t.Errorf("after the writes: %v bytes held, %v in flight, want 0 and 0", b, n)
	}
	r.close()
	if want := []string{"write t0", "done t0 true", "write t1 t2", "done t1 true", "done t2 true"}; !slices.Equal(r.fs.log(), want) {
		t.Errorf("events %v, want %v", r.fs.log(), want)
	}
	if got := destGauge(t, "otlpgate_client_queue_bytes", "file"); got != -1 {
		t.Errorf("otlpgate_client_queue_bytes{destination=\"file\"} still %v after Shutdown", got)
	}
}
