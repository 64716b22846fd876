package filedest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// Config of the file destination.
type Config struct {
	// Name labels the destination in the client's series (otlpgate_client_*, the status page)
	// and logs (-dest name=, default file).
	Name string
	// Path of the file (-file.path, default ./data/otlp.jsonl). Its directory is created.
	Path string
	// MaxBytes rotates the file once it would grow past this size (-file.max-bytes, default 100MiB).
	MaxBytes int64
	// MaxBackups is how many rotated files (path.1 is the newest) are kept (-file.max-backups, default 3).
	MaxBackups int
	// QueueBytes bounds the batches waiting to be written (-file.queue-bytes, default 64MiB);
	// past it batches are refused and counted in otlpgate_fastpath_destination_refused_batches_total.
	QueueBytes int64
	// SummaryInterval is how often a one-line summary is logged while batches are written
	// (-file.summary-interval, default 10s; 0 turns it off); an idle destination logs none.
	SummaryInterval time.Duration
	// GroupReadable creates the files 0640 and the directory 0750 instead of 0600 and 0700
	// (-file.group-readable, default false): the file holds what clients sent.
	GroupReadable bool
}

// modes returns the mode of the files and of the directory the destination creates.
func (c Config) modes() (file, dir os.FileMode) {
	if c.GroupReadable {
		return 0o640, 0o750
	}
	return 0o600, 0o700
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Name:            "file",
		Path:            "./data/otlp.jsonl",
		MaxBytes:        100 << 20,
		MaxBackups:      3,
		QueueBytes:      64 << 20,
		SummaryInterval: 10 * time.Second,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("filedest: empty name")
	case c.Path == "":
		return errors.New("filedest: empty path")
	case c.MaxBytes <= 0:
		return errors.New("filedest: max bytes must be positive")
	case c.MaxBackups < 0:
		return errors.New("filedest: max backups must not be negative")
	case c.QueueBytes <= 0:
		return errors.New("filedest: queue bytes must be positive")
	case c.SummaryInterval < 0:
		return errors.New("filedest: summary interval must not be negative")
	}
	return nil
}

var (
	writtenItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_file_written_items_total",
		Help: "Items written to the file destination (handed to the operating system).",
	}, []string{"signal"})
	failedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_file_failed_items_total",
		Help: "Items the file destination could not write, by reason (encode, open, write, shutdown).",
	}, []string{"reason"})
	fileErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_file_errors_total",
		Help: "File system errors of the file destination, by operation (open, write, truncate, rename, remove, close).",
	}, []string{"op"})
)

// burstBytes is how many bytes of lines the writer gathers from the queue before one write:
// enough that a busy destination makes few system calls, small enough that a batch does not
// wait long behind the others of its burst for its Done.
const burstBytes = 256 << 10

// Dest is the file destination. It implements pipeline.Destination.
//
// The writer takes batches from the queue in bursts: every batch waiting, up to burstBytes of
// lines, is encoded into one buffer, written with one write(2), and only then finished, so that
// Done(true) means the bytes reached the operating system and survive the process being killed.
// Any error closes the file; the next burst opens it again, so the destination recovers by
// itself once the disk does. What could not be written is finished with Done(false) and
// counted by reason.
type Dest struct {
	cfg    Config
	log    *slog.Logger
	fs     fileSystem
	queue  chan *pipeline.Batch
	queued atomic.Int64
	limit  atomic.Int64 // queue bound, QueueBytes until SetQueueBytes
	counts *client.Counts
	// held is the bytes of the batches queued or in the burst being written, and writing the
	// batches in that burst: the destination's otlpgate_client_queue_bytes and
	// otlpgate_client_in_flight_requests, which the status page reads to show a destination
	// that holds data and writes none (a stuck disk) as down.
	held, writing atomic.Int64
	unhold        func()

	errMu   sync.Mutex
	lastErr string // the latest failure, for the status page (LastError)
	errAt   time.Time

	mu struct {
		sync.Mutex
		closed bool
	}
	stop chan struct{} // closed by Shutdown: stop the summary ticker, drain what is queued
	done chan struct{} // closed when the writer goroutine returned

	summaryTicks atomic.Int64 // the summary ticker's ticks, for the tests

	// finish ends a batch: b.Done, or a recorder in tests, which need to see when it runs.
	finish func(b *pipeline.Batch, delivered bool)

	// owned by the writer goroutine
	f       file  // nil after an error, until the next burst opens the file again
	size    int64 // of the file, as far as written
	torn    bool  // a failed write left part of a line at the end of the file
	failing bool  // an error since the last good write: the next good one logs the recovery
	lost    int64 // items lost since failing began
	buf     []byte
	burst   []*pipeline.Batch // batches whose lines are in buf, in order
	ends    []int             // end of each burst batch's line in buf
	batches [fastpath.NumSignals]int64
	items   [fastpath.NumSignals]int64
	bytes   int64
}

// New opens (appends to) the file and starts the writer.
func New(cfg Config, log *slog.Logger) (*Dest, error) {
	return newDest(cfg, log, osFS{})
}

func newDest(cfg Config, log *slog.Logger, fs fileSystem) (*Dest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dest{cfg: cfg, log: log, fs: fs, queue: make(chan *pipeline.Batch, 4096),
		stop: make(chan struct{}), done: make(chan struct{}), finish: (*pipeline.Batch).Done,
		counts: client.NewCounts(cfg.Name)}
	d.limit.Store(cfg.QueueBytes)
	if err := d.open(); err != nil {
		return nil, err
	}
	d.unhold = d.counts.Hold(&d.held, &d.writing)
	go d.run()
	return d, nil
}

// Name implements pipeline.Destination.
func (d *Dest) Name() string { return d.cfg.Name }

// SetQueueBytes changes the queue bound in place (a reload that changed queue-bytes alone).
// Safe for concurrent use.
func (d *Dest) SetQueueBytes(n int64) { d.limit.Store(n) }

// LastError returns the latest failure to open or write the file and when it happened; "" when
// there was none. Safe for concurrent use.
func (d *Dest) LastError() (string, time.Time) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.lastErr, d.errAt
}

func (d *Dest) setLastError(err error) {
	d.errMu.Lock()
	d.lastErr, d.errAt = err.Error(), time.Now()
	d.errMu.Unlock()
}

// Enqueue implements pipeline.Destination. Safe for concurrent use.
func (d *Dest) Enqueue(b *pipeline.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return pipeline.ErrClosed
	}
	n := int64(b.Len())
	// Enqueue holds d.mu and the writer only takes bytes off: checking before adding keeps the
	// gauge from reading above the bound while batches are refused.
	if d.queued.Load()+n > d.limit.Load() {
		return pipeline.ErrFull
	}
	d.queued.Add(n)
	d.held.Add(n)
	select {
	case d.queue <- b:
		return nil
	default:
		d.queued.Add(-n)
		d.held.Add(-n)
		return pipeline.ErrFull
	}
}

// open opens (appends to) the file, creating its directory.
func (d *Dest) open() error {
	fileMode, dirMode := d.cfg.modes()
	if err := d.fs.MkdirAll(filepath.Dir(d.cfg.Path), dirMode); err != nil {
		fileErrors.WithLabelValues("open").Inc()
		return fmt.Errorf("filedest: cannot create directory: %w", err)
	}
	f, err := d.fs.OpenFile(d.cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, fileMode)
	if err != nil {
		fileErrors.WithLabelValues("open").Inc()
		return fmt.Errorf("filedest: cannot open %s: %w", d.cfg.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		fileErrors.WithLabelValues("open").Inc()
		return fmt.Errorf("filedest: cannot stat %s: %w", d.cfg.Path, err)
	}
	d.f, d.size = f, st.Size()
	return nil
}

func (d *Dest) closeFile() {
	if d.f == nil {
		return
	}
	if err := d.f.Close(); err != nil {
		fileErrors.WithLabelValues("close").Inc()
		d.log.Warn("file destination cannot close the file", "path", d.cfg.Path, "err", err)
	}
	d.f = nil
}

// rotate closes the file, shifts path.N-1 to path.N down to path -> path.1, and opens a new one.
// When the rename fails the file is opened again as it is, and grows past MaxBytes until a
// later rotation succeeds: nothing is lost for it. When the open fails the next burst tries
// again.
func (d *Dest) rotate() {
	d.closeFile()
	op, err := "remove", error(nil)
	if d.cfg.MaxBackups == 0 {
		err = d.fs.Remove(d.cfg.Path)
	} else {
		for i := d.cfg.MaxBackups - 1; i >= 1; i-- {
			// A missing backup is the normal case until there are MaxBackups of them.
			d.fs.Rename(fmt.Sprintf("%s.%d", d.cfg.Path, i), fmt.Sprintf("%s.%d", d.cfg.Path, i+1))
		}
		op, err = "rename", d.fs.Rename(d.cfg.Path, d.cfg.Path+".1")
	}
	switch {
	case err == nil || errors.Is(err, os.ErrNotExist):
		// The full file is gone: the next one starts empty even if it cannot be opened now,
		// or the next batch would rotate again, shifting the backups over a missing file.
		d.size = 0
	default:
		fileErrors.WithLabelValues(op).Inc()
		d.log.Error("file destination cannot rotate", "path", d.cfg.Path, "err", err)
	}
	if err := d.open(); err != nil {
		d.log.Error("file destination cannot open the file", "path", d.cfg.Path, "err", err)
	}
}

// run writes what the queue brings. The summary's ticker runs only while batches come: a tick
// that finds nothing written since the summary before stops it, and the next batch starts it
// again, so that an idle file destination wakes no thread and logs nothing.
func (d *Dest) run() {
	defer close(d.done)
	t := time.NewTicker(time.Hour)
	t.Stop()
	defer t.Stop()
	var tick <-chan time.Time // nil while the ticker is stopped
	var summarized int64      // batches written at the last summary
	for {
		select {
		case b := <-d.queue:
			d.writeBurst(b)
			if tick == nil && d.cfg.SummaryInterval > 0 {
				t.Reset(d.cfg.SummaryInterval)
				tick = t.C
			}
		case <-tick:
			d.summaryTicks.Add(1)
			if n := d.batches[0] + d.batches[1] + d.batches[2]; n != summarized {
				summarized = n
				d.summary()
				continue
			}
			t.Stop()
			tick = nil
		case <-d.stop:
			for {
				select {
				case b := <-d.queue:
					d.writeBurst(b)
				default:
					d.closeFile()
					d.summary()
					return
				}
			}
		}
	}
}

// writeBurst writes b and every batch queued behind it, up to burstBytes, with one write, then
// finishes them.
func (d *Dest) writeBurst(b *pipeline.Batch) {
	d.add(b)
	for len(d.buf) < burstBytes {
		select {
		case b := <-d.queue:
			d.add(b)
		default:
			d.flush()
			return
		}
	}
	d.flush()
}

// add encodes b into the burst, rotating first (after writing what the burst holds) when its
// line would take the file past MaxBytes.
func (d *Dest) add(b *pipeline.Batch) {
	d.queued.Add(-int64(b.Len()))
	start := len(d.buf)
	var err error
	d.buf, err = AppendJSONLine(d.buf, b.Signal, b.Payload.Bytes())
	if err != nil {
		d.buf = d.buf[:start]
		failedItems.WithLabelValues("encode").Add(float64(b.Items))
		d.counts.Dropped("encode", b.Items)
		d.setLastError(fmt.Errorf("cannot encode a %s batch: %w", b.Signal, err))
		d.log.Warn("file destination cannot encode a batch", "signal", b.Signal.String(), "err", err)
		d.held.Add(-int64(b.Len()))
		d.finish(b, false)
		return
	}
	if n := int64(len(d.buf) - start); d.size+int64(start) > 0 && d.size+int64(start)+n > d.cfg.MaxBytes {
		line := d.buf[start:]
		if start > 0 {
			// Write the lines before b to the file they belong in; b's line moves to the front.
			d.buf = d.buf[:start]
			d.flush()
			d.buf = append(d.buf, line...) // the buffer is empty now: the copy goes to its front
		}
		d.rotate()
	}
	d.burst = append(d.burst, b)
	d.ends = append(d.ends, len(d.buf))
	d.writing.Add(1)
}

// flush writes the burst with one write and finishes its batches: those whose line reached the
// operating system as delivered, the others as failed.
func (d *Dest) flush() {
	if len(d.burst) == 0 {
		return
	}
	reason, written := "open", 0
	var err error
	if d.f == nil {
		err = d.open()
	}
	if err == nil && d.torn {
		// End the broken line left by a failed write, so that the next line is whole.
		if _, err = d.f.Write([]byte{'\n'}); err == nil {
			d.torn = false
			d.size++
		}
		reason = "write"
	}
	if err == nil {
		reason = "write"
		written, err = d.f.Write(d.buf)
		if err == nil && written < len(d.buf) {
			err = io.ErrShortWrite
		}
		d.size += int64(written)
	}
	whole := 0 // batches whose line was written entirely
	for whole < len(d.burst) && d.ends[whole] <= written {
		whole++
	}
	if err != nil {
		if reason == "write" {
			fileErrors.WithLabelValues("write").Inc()
		}
		d.setLastError(err)
		d.cutTorn(written, whole)
		d.closeFile()
		if !d.failing {
			d.log.Error("file destination cannot write; it opens the file again for the next batch", "path", d.cfg.Path, "err", err)
		}
		d.failing = true
	} else if d.failing {
		d.failing = false
		d.log.Warn("file destination writes again", "path", d.cfg.Path, "lost_items", d.lost)
		d.lost = 0
	}
	for i, b := range d.burst {
		d.held.Add(-int64(b.Len()))
		d.writing.Add(-1)
		if i < whole {
			d.batches[b.Signal]++
			d.items[b.Signal] += int64(b.Items)
			d.bytes += int64(b.Len())
			writtenItems.WithLabelValues(b.Signal.String()).Add(float64(b.Items))
			d.counts.Delivered(b.Items, b.Len())
			d.finish(b, true)
		} else {
			failedItems.WithLabelValues(reason).Add(float64(b.Items))
			d.counts.Dropped(reason, b.Items)
			d.lost += int64(b.Items)
			d.finish(b, false)
		}
		d.burst[i] = nil
	}
	d.burst, d.ends = d.burst[:0], d.ends[:0]
	if cap(d.buf) > 4*burstBytes {
		d.buf = nil // one huge batch must not pin its buffer for ever
	} else {
		d.buf = d.buf[:0]
	}
}

// cutTorn removes the part of a line that a failed write left at the end of the file, so that
// the file holds whole lines only; when that fails too, the next write starts with a newline.
func (d *Dest) cutTorn(written, whole int) {
	start := 0
	if whole > 0 {
		start = d.ends[whole-1]
	}
	part := int64(written - start)
	if part <= 0 || d.f == nil {
		return
	}
	if err := d.f.Truncate(d.size - part); err != nil {
		fileErrors.WithLabelValues("truncate").Inc()
		d.torn = true
		return
	}
	d.size -= part
}

func (d *Dest) summary() {
	if d.cfg.SummaryInterval == 0 {
		return
	}
	d.log.Info("file destination", "name", d.cfg.Name,
		"path", d.cfg.Path,
		"spans", d.items[fastpath.Traces], "points", d.items[fastpath.Metrics], "logs", d.items[fastpath.Logs],
		"batches", d.batches[0]+d.batches[1]+d.batches[2], "bytes", d.bytes)
}

// Shutdown stops accepting batches and writes what is queued; batches still queued when ctx ends
// are counted as lost (reason shutdown) and reported in the error, which is nil when nothing was
// lost. The caller logs it: Shutdown does not. Safe to call once, from any goroutine.
func (d *Dest) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.mu.closed = true
	d.mu.Unlock()
	close(d.stop)
	defer d.unhold() // the destination leaves otlpgate_client_queue_bytes
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
	}
	// The writer is stuck on the disk; give up on the rest so the process can exit.
	lost := 0
	for {
		select {
		case b := <-d.queue:
			d.queued.Add(-int64(b.Len()))
			d.held.Add(-int64(b.Len()))
			failedItems.WithLabelValues("shutdown").Add(float64(b.Items))
			d.counts.Dropped(client.DropShutdownQueued.String(), b.Items)
			lost += b.Items
			d.finish(b, false)
			continue
		default:
		}
		break
	}
	if lost > 0 {
		return fmt.Errorf("filedest: %d items not written before the shutdown deadline (otlpgate_file_failed_items_total{reason=\"shutdown\"})", lost)
	}
	select {
	case <-d.done:
		return nil // the writer finished what it had as the deadline passed
	default:
	}
	return errors.New("filedest: the writer was still busy on the file at the shutdown deadline; its last batch may be incomplete")
}
