package filedest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Config of the file destination.
type Config struct {
	// Path of the file (-file.path, default ./data/otlp.jsonl). Its directory is created.
	Path string
	// MaxBytes rotates the file once it would grow past this size (-file.max-bytes, default 100MiB).
	MaxBytes int64
	// MaxBackups is how many rotated files (path.1 is the newest) are kept (-file.max-backups, default 3).
	MaxBackups int
	// QueueBytes bounds the batches waiting to be written (-file.queue-bytes, default 64MiB);
	// past it batches are refused and counted in otlpgate_fastpath_destination_refused_batches_total.
	QueueBytes int64
	// SummaryInterval is how often a one-line summary is logged (-file.summary-interval, default 10s; 0 turns it off).
	SummaryInterval time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
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
		Help: "Items written to the file destination.",
	}, []string{"signal"})
	failedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_file_failed_items_total",
		Help: "Items the file destination could not write, by reason (encode, write, shutdown).",
	}, []string{"reason"})
)

// Dest is the file destination. It implements fastpath.Destination.
type Dest struct {
	cfg    Config
	log    *slog.Logger
	queue  chan *fastpath.Batch
	queued atomic.Int64

	mu struct {
		sync.Mutex
		closed bool
	}
	stop chan struct{} // closed by Shutdown: stop the summary ticker, drain what is queued
	done chan struct{} // closed when the writer goroutine returned

	// owned by the writer goroutine
	f       *os.File
	w       *bufio.Writer
	size    int64
	line    []byte
	batches [fastpath.NumSignals]int64
	items   [fastpath.NumSignals]int64
	bytes   int64
}

// New opens (appends to) the file and starts the writer.
func New(cfg Config, log *slog.Logger) (*Dest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dest{cfg: cfg, log: log, queue: make(chan *fastpath.Batch, 4096),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := d.open(); err != nil {
		return nil, err
	}
	go d.run()
	return d, nil
}

// Name implements fastpath.Destination.
func (d *Dest) Name() string { return "file" }

// Enqueue implements fastpath.Destination. Safe for concurrent use.
func (d *Dest) Enqueue(b *fastpath.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return fastpath.ErrClosed
	}
	n := int64(b.Len())
	if d.queued.Add(n) > d.cfg.QueueBytes {
		d.queued.Add(-n)
		return fastpath.ErrFull
	}
	select {
	case d.queue <- b:
		return nil
	default:
		d.queued.Add(-n)
		return fastpath.ErrFull
	}
}

func (d *Dest) open() error {
	if err := os.MkdirAll(filepath.Dir(d.cfg.Path), 0o755); err != nil {
		return fmt.Errorf("filedest: cannot create directory: %w", err)
	}
	f, err := os.OpenFile(d.cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("filedest: cannot open %s: %w", d.cfg.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("filedest: cannot stat %s: %w", d.cfg.Path, err)
	}
	d.f, d.size = f, st.Size()
	if d.w == nil {
		d.w = bufio.NewWriterSize(f, 256<<10)
	} else {
		d.w.Reset(f)
	}
	return nil
}

// rotate closes the file, shifts path.N-1 to path.N down to path -> path.1, and opens a new one.
func (d *Dest) rotate() error {
	if err := d.w.Flush(); err != nil {
		return err
	}
	if err := d.f.Close(); err != nil {
		return err
	}
	if d.cfg.MaxBackups == 0 {
		os.Remove(d.cfg.Path)
	} else {
		for i := d.cfg.MaxBackups - 1; i >= 1; i-- {
			os.Rename(fmt.Sprintf("%s.%d", d.cfg.Path, i), fmt.Sprintf("%s.%d", d.cfg.Path, i+1))
		}
		if err := os.Rename(d.cfg.Path, d.cfg.Path+".1"); err != nil {
			return err
		}
	}
	return d.open()
}

func (d *Dest) run() {
	defer close(d.done)
	var tick <-chan time.Time
	if d.cfg.SummaryInterval > 0 {
		t := time.NewTicker(d.cfg.SummaryInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case b := <-d.queue:
			d.write(b)
		case <-tick:
			d.summary()
		case <-d.stop:
			for {
				select {
				case b := <-d.queue:
					d.write(b)
				default:
					d.w.Flush()
					d.f.Close()
					d.summary()
					return
				}
			}
		}
	}
}

func (d *Dest) write(b *fastpath.Batch) {
	n := int64(b.Len())
	defer d.queued.Add(-n)
	var err error
	d.line, err = AppendJSONLine(d.line[:0], b.Signal, b.Payload.Bytes())
	if err != nil {
		failedItems.WithLabelValues("encode").Add(float64(b.Items))
		d.log.Warn("file destination cannot encode a batch", "signal", b.Signal.String(), "err", err)
		b.Done(false)
		return
	}
	if d.size > 0 && d.size+int64(len(d.line)) > d.cfg.MaxBytes {
		if err := d.rotate(); err != nil {
			d.log.Error("file destination cannot rotate", "path", d.cfg.Path, "err", err)
		}
	}
	if _, err := d.w.Write(d.line); err == nil && len(d.queue) == 0 {
		err = d.w.Flush() // flush whenever idle, so the file is current for readers
	}
	if err != nil {
		failedItems.WithLabelValues("write").Add(float64(b.Items))
		d.log.Error("file destination cannot write", "path", d.cfg.Path, "err", err)
		b.Done(false)
		return
	}
	d.size += int64(len(d.line))
	d.batches[b.Signal]++
	d.items[b.Signal] += int64(b.Items)
	d.bytes += n
	writtenItems.WithLabelValues(b.Signal.String()).Add(float64(b.Items))
	b.Done(true)
}

func (d *Dest) summary() {
	if d.cfg.SummaryInterval == 0 {
		return
	}
	d.log.Info("file destination",
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
			failedItems.WithLabelValues("shutdown").Add(float64(b.Items))
			lost += b.Items
			b.Done(false)
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
