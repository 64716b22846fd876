package fastpath

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Intake names the intake that asks the Limiter, for the refusal counters.
type Intake uint8

const (
	IntakeGRPC Intake = iota
	IntakeKafka
	IntakeUDS
	IntakeHTTP
	// NumIntakes is the number of intakes, for arrays indexed by Intake.
	NumIntakes
)

var intakeNames = [NumIntakes]string{"grpc", "kafka", "uds", "http"}

// String returns the intake as used in metric labels. Safe for concurrent use.
func (i Intake) String() string {
	if i < NumIntakes {
		return intakeNames[i]
	}
	return "unknown"
}

// ErrIntakeBusy is what an intake reports when the Limiter refused it.
var ErrIntakeBusy = errors.New("fastpath: intake limit reached")

// LimiterConfig bounds what every intake holds before admission, together.
type LimiterConfig struct {
	// MaxBytes bounds the bytes intakes hold before admission: gRPC calls being received,
	// Kafka requests read and not yet answered, UDS messages waiting for their rest
	// HTTP bodies being read (-intake.max-bytes, default 256MiB). Refusals are counted in
	// otlpgate_intake_refused_total{resource="bytes"}.
	MaxBytes int64
	// MaxDecodes bounds the decodes running at once: decompressing and decoding a Kafka push
	// (-intake.max-decodes, default 0: twice GOMAXPROCS). Refusals are counted in
	// otlpgate_intake_refused_total{resource="decodes"}.
	MaxDecodes int
	// Wait bounds how long an intake that may wait does, before it refuses
	// (-intake.wait, default 1s). Event-loop intakes never wait.
	Wait time.Duration
}

// DefaultLimiterConfig returns the defaults documented on LimiterConfig. Safe for concurrent use.
func DefaultLimiterConfig() LimiterConfig {
	return LimiterConfig{MaxBytes: 256 << 20, Wait: time.Second}
}

// Validate reports a configuration that cannot work. Safe for concurrent use.
func (c LimiterConfig) Validate() error {
	switch {
	case c.MaxBytes < 1<<20:
		return fmt.Errorf("fastpath: intake max bytes %d below 1MiB", c.MaxBytes)
	case c.MaxDecodes < 0:
		return errors.New("fastpath: intake max decodes must not be negative")
	case c.Wait < 0:
		return errors.New("fastpath: intake wait must not be negative")
	}
	return nil
}

const (
	resBytes = iota
	resDecodes
	numResources
)

var (
	// live sums what every Limiter of the process holds: there is one in production, and the
	// gauges are created once, here, rather than per Limiter.
	liveBytes, liveDecodes atomic.Int64
	highBytes              atomic.Int64

	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_intake_bytes_in_flight",
		Help: "Bytes intakes hold before admission (gRPC calls and HTTP bodies being received, Kafka requests, UDS partial messages), bounded by -intake.max-bytes.",
	}, func() float64 { return float64(liveBytes.Load()) })
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_intake_bytes_in_flight_high_water",
		Help: "The highest otlpgate_intake_bytes_in_flight seen since start.",
	}, func() float64 { return float64(highBytes.Load()) })
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_intake_decodes_in_flight",
		Help: "Decodes running before admission, bounded by -intake.max-decodes.",
	}, func() float64 { return float64(liveDecodes.Load()) })

	intakeRefused = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_intake_refused_total",
		Help: "Requests an intake refused, paused or discarded because the intake limiter was full, by intake and resource (bytes: -intake.max-bytes, decodes: -intake.max-decodes).",
	}, []string{"intake", "resource"})
	intakeRefusedC = func() (c [NumIntakes][numResources]prometheus.Counter) {
		for i := range NumIntakes {
			c[i][resBytes] = intakeRefused.WithLabelValues(i.String(), "bytes")
			c[i][resDecodes] = intakeRefused.WithLabelValues(i.String(), "decodes")
		}
		return c
	}()
)

// Limiter is the process-wide intake limiter: every intake takes bytes from it before it
// holds a large body, and a decode slot before it decodes one, and gives them back once the
// result is admitted (copied into the pipeline) or refused. What the queue bounds after
// admission (-queue.max-bytes), the Limiter bounds before it.
//
// Waiters are served in arrival order, so a large request is not starved by small ones. Every
// method is safe for concurrent use and none allocates (waiters are pooled).
type Limiter struct {
	wait    time.Duration
	bytes   gate
	decodes gate
}

// NewLimiter returns a Limiter for cfg, which must be valid.
func NewLimiter(cfg LimiterConfig) *Limiter {
	if err := cfg.Validate(); err != nil {
		panic("BUG: invalid LimiterConfig: " + err.Error())
	}
	d := cfg.MaxDecodes
	if d == 0 {
		d = 2 * runtime.GOMAXPROCS(0)
	}
	l := &Limiter{wait: cfg.Wait}
	l.bytes.init(cfg.MaxBytes, &liveBytes, &highBytes)
	l.decodes.init(int64(d), &liveDecodes, nil)
	return l
}

// MaxBytes returns the byte bound. Safe for concurrent use.
func (l *Limiter) MaxBytes() int64 { return l.bytes.max }

// Wait returns the longest wait of AcquireBytes and AcquireDecode, which is also the delay a
// refused client is told to wait before it retries. Safe for concurrent use.
func (l *Limiter) Wait() time.Duration { return l.wait }

// Bytes returns the bytes held now. Safe for concurrent use.
func (l *Limiter) Bytes() int64 { return l.bytes.used.Load() }

// HighWaterBytes returns the most bytes held at once since the Limiter was made. Safe for
// concurrent use.
func (l *Limiter) HighWaterBytes() int64 { return l.bytes.high.Load() }

// Decodes returns the decode slots held now. Safe for concurrent use.
func (l *Limiter) Decodes() int64 { return l.decodes.used.Load() }

// AcquireBytes takes n bytes, waiting up to the configured wait (or until done is closed; nil
// never is). It reports false, counted as a refusal of in, when they could not be had, and at
// once when n exceeds MaxBytes. Release with ReleaseBytes(n). Safe for concurrent use.
func (l *Limiter) AcquireBytes(in Intake, n int64, done <-chan struct{}) bool {
	if l.bytes.acquire(n, l.wait, done) {
		return true
	}
	intakeRefusedC[in][resBytes].Inc()
	return false
}

// TryAcquireBytes is AcquireBytes without waiting, for event loops. Safe for concurrent use.
func (l *Limiter) TryAcquireBytes(in Intake, n int64) bool {
	if l.bytes.acquire(n, 0, nil) {
		return true
	}
	intakeRefusedC[in][resBytes].Inc()
	return false
}

// ReleaseBytes gives back n bytes taken by AcquireBytes or TryAcquireBytes. Safe for
// concurrent use.
func (l *Limiter) ReleaseBytes(n int64) { l.bytes.release(n) }

// AcquireDecode takes a decode slot, waiting like AcquireBytes. Release with ReleaseDecode.
// Safe for concurrent use.
func (l *Limiter) AcquireDecode(in Intake, done <-chan struct{}) bool {
	if l.decodes.acquire(1, l.wait, done) {
		return true
	}
	intakeRefusedC[in][resDecodes].Inc()
	return false
}

// ReleaseDecode gives back a slot taken by AcquireDecode. Safe for concurrent use.
func (l *Limiter) ReleaseDecode() { l.decodes.release(1) }

// gate is a weighted semaphore with a FIFO of waiters.
//
// Invariants (under mu):
//  1. used never exceeds max.
//  2. A waiter is in the list until it is granted (granted set, its n added to used) or it
//     removes itself after giving up; never both.
//  3. When the list is not empty, its head does not fit (used+head.n > max): every release and
//     every removal re-checks it.
type gate struct {
	max   int64
	used  atomic.Int64 // written under mu, read lock-free by gauges and tests
	high  atomic.Int64
	total *atomic.Int64 // the process-wide sum this gate adds to
	peak  *atomic.Int64 // the process-wide high-water mark, or nil
	mu    sync.Mutex
	head  *waiter
	tail  *waiter
}

type waiter struct {
	next    *waiter
	n       int64
	granted bool
	ready   chan struct{} // capacity 1: the grant never blocks the releaser
	timer   *time.Timer
}

var waiterPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ready: make(chan struct{}, 1), timer: t}
}}

func (g *gate) init(max int64, total, peak *atomic.Int64) {
	g.max, g.total, g.peak = max, total, peak
}

func (g *gate) acquire(n int64, wait time.Duration, done <-chan struct{}) bool {
	if n < 0 || n > g.max {
		return false
	}
	g.mu.Lock()
	if g.head == nil && g.used.Load()+n <= g.max {
		g.takeLocked(n)
		g.mu.Unlock()
		return true
	}
	if wait <= 0 {
		g.mu.Unlock()
		return false
	}
	w := waiterPool.Get().(*waiter)
	w.n, w.granted, w.next = n, false, nil
	if g.tail == nil {
		g.head = w
	} else {
		g.tail.next = w
	}
	g.tail = w
	g.mu.Unlock()

	w.timer.Reset(wait)
	select {
	case <-w.ready:
	case <-w.timer.C:
	case <-done:
	}
	w.timer.Stop()
	g.mu.Lock()
	ok := w.granted
	if !ok {
		g.removeLocked(w)
		// The head may have been waiting behind w only.
		g.grantLocked()
	}
	g.mu.Unlock()
	// A grant that raced with the timer left its token: drain it before the waiter is reused.
	select {
	case <-w.ready:
	default:
	}
	waiterPool.Put(w)
	return ok
}

func (g *gate) release(n int64) {
	g.mu.Lock()
	u := g.used.Add(-n)
	g.total.Add(-n)
	if u < 0 {
		g.mu.Unlock()
		panic("BUG: intake limiter released more than it granted")
	}
	g.grantLocked()
	g.mu.Unlock()
}

func (g *gate) takeLocked(n int64) {
	u := g.used.Add(n)
	t := g.total.Add(n)
	if u > g.high.Load() {
		g.high.Store(u)
	}
	if g.peak != nil {
		for p := g.peak.Load(); t > p && !g.peak.CompareAndSwap(p, t); p = g.peak.Load() {
		}
	}
}

// grantLocked grants waiters from the head while they fit.
func (g *gate) grantLocked() {
	for w := g.head; w != nil && g.used.Load()+w.n <= g.max; w = g.head {
		g.head = w.next
		if g.head == nil {
			g.tail = nil
		}
		w.next = nil
		w.granted = true
		g.takeLocked(w.n)
		w.ready <- struct{}{}
	}
}

func (g *gate) removeLocked(w *waiter) {
	var prev *waiter
	for c := g.head; c != nil; prev, c = c, c.next {
		if c != w {
			continue
		}
		if prev == nil {
			g.head = c.next
		} else {
			prev.next = c.next
		}
		if g.tail == c {
			g.tail = prev
		}
		c.next = nil
		return
	}
}

// IntakeRefusedCounter returns the counter of in's byte refusals, for tests of the intakes.
func IntakeRefusedCounter(in Intake) prometheus.Counter { return intakeRefusedC[in][resBytes] }
