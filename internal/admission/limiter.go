package admission

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// Intake names the intake that asks the Limiter, for the refusal counters.
type Intake uint8

const (
	IntakeGRPC Intake = iota
	IntakeKafka
	IntakeUDS
	IntakeHTTP
	// IntakeKafkaConsume is the Kafka consumer intake (-kafka.consume.*), whose OTLP/JSON
	// records' protobuf form is charged to the shared budget while it is built.
	IntakeKafkaConsume
	// NumIntakes is the number of intakes, for arrays indexed by Intake.
	NumIntakes
)

var intakeNames = [NumIntakes]string{"grpc", "kafka", "uds", "http", "kafka_consume"}

// String returns the intake as used in metric labels. Safe for concurrent use.
func (i Intake) String() string {
	if i < NumIntakes {
		return intakeNames[i]
	}
	return "unknown"
}

// ErrIntakeBusy is what an intake reports when the Limiter refused it.
var ErrIntakeBusy = errors.New("admission: intake limit reached")

// LimiterConfig bounds what the intakes hold before admission.
//
// The intakes that can authenticate their clients (gRPC and OTLP/HTTP) share one budget; Kafka
// and UDS, which cannot, have one of their own, so that nobody who can merely reach their port
// can take the memory the authenticated clients are served from.
type LimiterConfig struct {
	// MaxBytes bounds the bytes the gRPC and OTLP/HTTP intakes hold before admission: gRPC
	// calls being received, HTTP bodies as they are read and as they are decompressed
	// (-intake.max-bytes, default 256MiB). Refusals are counted in
	// otlpgate_intake_refused_total{resource="bytes"}.
	MaxBytes int64
	// UnauthenticatedMaxBytes bounds, apart from MaxBytes, the bytes Kafka and UDS hold: Kafka
	// requests as they are read and pushes as they are decompressed, UDS partial messages
	// (-intake.unauthenticated.max-bytes, default 64MiB; 0: as large as MaxBytes). Refusals
	// are counted under their intakes in otlpgate_intake_refused_total{resource="bytes"}.
	UnauthenticatedMaxBytes int64
	// InflateMaxBytes bounds the bytes gRPC messages are decompressed into at once, each
	// message claiming the largest it may inflate to before it inflates, apart from MaxBytes: a
	// gRPC call holds its reservation while its message inflates, and inflating within the
	// same budget could leave every call waiting for the others (-intake.inflate-bytes,
	// default 64MiB; 0: as large as MaxBytes). OTLP/HTTP
	// bodies inflate within MaxBytes, Kafka pushes within UnauthenticatedMaxBytes. Refusals
	// are counted in otlpgate_intake_refused_total{resource="inflate_bytes"}.
	InflateMaxBytes int64
	// MaxConnBytes caps what one gRPC connection's calls hold together, the only intake whose
	// connections receive several requests at once (-intake.max-conn-bytes, default 64MiB;
	// 0: MaxBytes). Refusals are counted in otlpgate_intake_refused_total{resource="conn_bytes"}.
	MaxConnBytes int64
	// ProgressTimeout ends a gRPC connection that holds intake bytes and receives less than
	// ProgressBytes in this long (-intake.progress-timeout, default 10s; 0: never), counted in
	// otlpgate_intake_refused_total{resource="stalled"}. The other intakes hold only bytes that
	// arrived, for at most their read timeouts.
	ProgressTimeout time.Duration
	// MaxDecodes bounds the decodes running at once: decompressing and decoding a Kafka push
	// (-intake.max-decodes, default 0: twice GOMAXPROCS). Refusals are counted in
	// otlpgate_intake_refused_total{resource="decodes"}.
	MaxDecodes int
	// Wait bounds how long an intake that may wait does, before it refuses
	// (-intake.wait, default 1s). Event-loop intakes never wait.
	Wait time.Duration
}

// ProgressBytes is what a gRPC connection holding intake bytes must deliver every
// ProgressTimeout: one HTTP/2 frame's worth. A client that sends its requests sends far more;
// pings and settings frames do not add up to it.
const ProgressBytes = 16 << 10

// DefaultLimiterConfig returns the defaults documented on LimiterConfig. Safe for concurrent use.
func DefaultLimiterConfig() LimiterConfig {
	return LimiterConfig{MaxBytes: 256 << 20, UnauthenticatedMaxBytes: 64 << 20, InflateMaxBytes: 64 << 20,
		MaxConnBytes: 64 << 20, ProgressTimeout: 10 * time.Second, Wait: time.Second}
}

// Validate reports a configuration that cannot work. Safe for concurrent use.
func (c LimiterConfig) Validate() error {
	switch {
	case c.MaxBytes < 1<<20:
		return fmt.Errorf("admission: intake max bytes %d below 1MiB", c.MaxBytes)
	case c.UnauthenticatedMaxBytes != 0 && c.UnauthenticatedMaxBytes < 1<<20:
		return fmt.Errorf("admission: unauthenticated intake max bytes %d below 1MiB", c.UnauthenticatedMaxBytes)
	case c.InflateMaxBytes != 0 && c.InflateMaxBytes < 1<<20:
		return fmt.Errorf("admission: intake inflate bytes %d below 1MiB", c.InflateMaxBytes)
	case c.MaxConnBytes != 0 && (c.MaxConnBytes < 1<<20 || c.MaxConnBytes > c.MaxBytes):
		return fmt.Errorf("admission: intake max conn bytes %d outside [1MiB, intake max bytes %d]", c.MaxConnBytes, c.MaxBytes)
	case c.ProgressTimeout < 0:
		return errors.New("admission: intake progress timeout must not be negative")
	case c.MaxDecodes < 0:
		return errors.New("admission: intake max decodes must not be negative")
	case c.Wait < 0:
		return errors.New("admission: intake wait must not be negative")
	}
	return nil
}

// refusal is why the Limiter refused, for the refusal counters.
type refusal uint8

const (
	// refusedBytes: the intake's budget (MaxBytes or UnauthenticatedMaxBytes) had no room.
	refusedBytes refusal = iota
	// refusedDecodes: MaxDecodes decodes were running.
	refusedDecodes
	// refusedConnBytes: the connection held MaxConnBytes already.
	refusedConnBytes
	// refusedStalled: a connection holding bytes was ended for want of progress.
	refusedStalled
	// refusedInflate: InflateMaxBytes had no room for a gRPC message's decompressed bytes.
	refusedInflate
	numRefusals
)

var refusalNames = [numRefusals]string{"bytes", "decodes", "conn_bytes", "stalled", "inflate_bytes"}

// Budgets, for the gauges.
const (
	budgetShared  = iota // gRPC and OTLP/HTTP
	budgetOpen           // Kafka and UDS
	budgetInflate        // gRPC decompression
	numBudgets
)

var budgetNames = [numBudgets]string{"grpc_http", "kafka_uds", "grpc_inflate"}

var (
	// live sums what every Limiter of the process holds: there is one in production, and the
	// gauges are created once, here, rather than per Limiter.
	liveBytes, liveDecodes atomic.Int64
	highBytes              atomic.Int64
	liveBudget             [numBudgets]atomic.Int64

	_ = statusmetrics.Auto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_intake_bytes_in_flight",
		Help: "Bytes intakes hold before admission (gRPC calls being received and their messages being inflated, HTTP bodies being read and decompressed, Kafka requests and decompressed pushes, UDS partial messages), bounded by -intake.max-bytes, -intake.unauthenticated.max-bytes and -intake.inflate-bytes together.",
	}, func() float64 { return float64(liveBytes.Load()) })
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_intake_bytes_in_flight_high_water",
		Help: "The highest otlpgate_intake_bytes_in_flight seen since start.",
	}, func() float64 { return float64(highBytes.Load()) })
	_ = func() [numBudgets]prometheus.GaugeFunc {
		var g [numBudgets]prometheus.GaugeFunc
		for b := range g {
			g[b] = promauto.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "otlpgate_intake_budget_bytes_in_flight",
				Help:        "otlpgate_intake_bytes_in_flight by budget: grpc_http (bounded by -intake.max-bytes), kafka_uds (-intake.unauthenticated.max-bytes), grpc_inflate (-intake.inflate-bytes).",
				ConstLabels: prometheus.Labels{"budget": budgetNames[b]},
			}, func() float64 { return float64(liveBudget[b].Load()) })
		}
		return g
	}()
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_intake_decodes_in_flight",
		Help: "Decodes running before admission, bounded by -intake.max-decodes.",
	}, func() float64 { return float64(liveDecodes.Load()) })

	intakeRefused = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_intake_refused_total",
		Help: "Requests an intake refused, paused or discarded because the intake limiter had no room, and gRPC connections it ended, by intake and resource (bytes: -intake.max-bytes, or -intake.unauthenticated.max-bytes for kafka and uds; decodes: -intake.max-decodes; conn_bytes: -intake.max-conn-bytes; inflate_bytes: -intake.inflate-bytes; stalled: a connection holding bytes received too little for -intake.progress-timeout).",
	}, []string{"intake", "resource"})
	intakeRefusedC = func() (c [NumIntakes][numRefusals]prometheus.Counter) {
		for i := range NumIntakes {
			for r := range numRefusals {
				c[i][r] = intakeRefused.WithLabelValues(i.String(), refusalNames[r])
			}
		}
		return c
	}()
)

// Limiter is the process-wide intake limiter: every intake takes bytes from it before it
// holds a large body, and a decode slot before it decodes one, and gives them back once the
// result is admitted (copied into the pipeline) or refused. What the queue bounds after
// admission (-queue.max-bytes), the Limiter bounds before it.
//
// Bytes are taken as they are about to be held, not as a client declares them: a body read
// grows its buffer (and its reservation) as bytes arrive, a decompression takes budget for
// the output it is about to produce. The one exception is a gRPC call, whose whole message
// gRPC lets in once the call reads it: see Account.
//
// Waiters are served in arrival order, so a large request is not starved by small ones. Every
// method is safe for concurrent use and none allocates (waiters are pooled), except NewAccount.
type Limiter struct {
	wait     time.Duration
	progress time.Duration
	maxConn  int64
	bytes    [numBudgets]gate
	decodes  gate
	// total is what every budget holds, high its high-water mark.
	total, high atomic.Int64
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
	open := cfg.UnauthenticatedMaxBytes
	if open == 0 {
		open = cfg.MaxBytes
	}
	inflate := cfg.InflateMaxBytes
	if inflate == 0 {
		inflate = cfg.MaxBytes
	}
	l := &Limiter{wait: cfg.Wait, progress: cfg.ProgressTimeout, maxConn: cfg.MaxConnBytes}
	if l.maxConn == 0 {
		l.maxConn = cfg.MaxBytes
	}
	l.bytes[budgetShared].init(cfg.MaxBytes, &liveBudget[budgetShared], nil)
	l.bytes[budgetOpen].init(open, &liveBudget[budgetOpen], nil)
	l.bytes[budgetInflate].init(inflate, &liveBudget[budgetInflate], nil)
	l.decodes.init(int64(d), &liveDecodes, nil)
	prefillWaiterPool()
	return l
}

// budgetOf is the budget intake in draws from.
func budgetOf(in Intake) int {
	if in == IntakeKafka || in == IntakeUDS {
		return budgetOpen
	}
	return budgetShared
}

// MaxBytes returns the byte bound of the gRPC and OTLP/HTTP intakes. Safe for concurrent use.
func (l *Limiter) MaxBytes() int64 { return l.bytes[budgetShared].max }

// MaxBytesFor returns the byte bound intake in draws from. Safe for concurrent use.
func (l *Limiter) MaxBytesFor(in Intake) int64 { return l.bytes[budgetOf(in)].max }

// MaxConnBytes returns the cap of one Account. Safe for concurrent use.
func (l *Limiter) MaxConnBytes() int64 { return l.maxConn }

// ProgressTimeout returns how long a connection holding bytes may go without ProgressBytes
// arriving, 0 for no limit. Safe for concurrent use.
func (l *Limiter) ProgressTimeout() time.Duration { return l.progress }

// Wait returns the longest wait of AcquireBytes and AcquireDecode, which is also the delay a
// refused client is told to wait before it retries. Safe for concurrent use.
func (l *Limiter) Wait() time.Duration { return l.wait }

// Bytes returns the bytes held now, in every budget. Safe for concurrent use.
func (l *Limiter) Bytes() int64 { return l.total.Load() }

// BytesFor returns the bytes held now in the budget intake in draws from. Safe for concurrent
// use.
func (l *Limiter) BytesFor(in Intake) int64 { return l.bytes[budgetOf(in)].used.Load() }

// HighWaterBytes returns the most bytes held at once since the Limiter was made, in every
// budget together. Safe for concurrent use.
func (l *Limiter) HighWaterBytes() int64 { return l.high.Load() }

// Decodes returns the decode slots held now. Safe for concurrent use.
func (l *Limiter) Decodes() int64 { return l.decodes.used.Load() }

// AcquireBytes takes n bytes from in's budget, waiting up to the configured wait (or until
// done is closed; nil never is). It reports false, counted as a refusal of in, when they could
// not be had, and at once when n exceeds the budget. Release with ReleaseBytes(in, n). Safe for
// concurrent use.
func (l *Limiter) AcquireBytes(in Intake, n int64, done <-chan struct{}) bool {
	if l.take(in, n, l.wait, done) {
		return true
	}
	intakeRefusedC[in][refusedBytes].Inc()
	return false
}

// TryAcquireBytes is AcquireBytes without waiting, for event loops. Safe for concurrent use.
func (l *Limiter) TryAcquireBytes(in Intake, n int64) bool {
	if l.take(in, n, 0, nil) {
		return true
	}
	intakeRefusedC[in][refusedBytes].Inc()
	return false
}

// ReleaseBytes gives back n bytes in took by AcquireBytes or TryAcquireBytes. Safe for
// concurrent use.
func (l *Limiter) ReleaseBytes(in Intake, n int64) {
	// The total goes down before the budget frees the bytes (and up after it took them, in
	// take): so the total never counts bytes a budget has already handed to someone else, and
	// its high-water mark never exceeds what the budgets allow together.
	l.noteTotal(-n)
	l.bytes[budgetOf(in)].release(n)
}

// take takes n bytes from in's budget and adds them to the process-wide total.
func (l *Limiter) take(in Intake, n int64, wait time.Duration, done <-chan struct{}) bool {
	if !l.bytes[budgetOf(in)].acquire(n, wait, done) {
		return false
	}
	l.noteTotal(n)
	return true
}

// noteTotal adds n to what the Limiter and the process hold over every budget, and raises the
// high-water marks.
func (l *Limiter) noteTotal(n int64) {
	u := l.total.Add(n)
	t := liveBytes.Add(n)
	if n <= 0 {
		return
	}
	raise(&l.high, u)
	raise(&highBytes, t)
}

// raise lifts a high-water mark to v.
func raise(h *atomic.Int64, v int64) {
	for p := h.Load(); v > p && !h.CompareAndSwap(p, v); p = h.Load() {
	}
}

// AcquireDecode takes a decode slot, waiting like AcquireBytes. Release with ReleaseDecode.
// Safe for concurrent use.
func (l *Limiter) AcquireDecode(in Intake, done <-chan struct{}) bool {
	if l.decodes.acquire(1, l.wait, done) {
		return true
	}
	intakeRefusedC[in][refusedDecodes].Inc()
	return false
}

// ReleaseDecode gives back a slot taken by AcquireDecode. Safe for concurrent use.
func (l *Limiter) ReleaseDecode() { l.decodes.release(1) }

// AcquireInflate takes n bytes of the inflate budget for a gRPC message being decompressed,
// waiting up to wait (or until done is closed) rather than the Limiter's wait: a decompressor
// takes from it once per message and holds it only while it inflates, so a waiter is served
// as soon as the messages ahead of it are inflated, and a refusal would reach the client as an
// error it does not retry. A refusal is counted as an inflate_bytes refusal of in. Release
// with ReleaseInflate. Safe for concurrent use.
func (l *Limiter) AcquireInflate(in Intake, n int64, wait time.Duration, done <-chan struct{}) bool {
	if l.bytes[budgetInflate].acquire(n, wait, done) {
		l.noteTotal(n)
		return true
	}
	intakeRefusedC[in][refusedInflate].Inc()
	return false
}

// InflateWaiting returns how many decompressions wait for the inflate budget now. Safe for
// concurrent use.
func (l *Limiter) InflateWaiting() int { return l.bytes[budgetInflate].waiting() }

// BytesWaiting returns how many reservations of in wait for room in its budget. Safe for
// concurrent use.
func (l *Limiter) BytesWaiting(in Intake) int { return l.bytes[budgetOf(in)].waiting() }

// ReleaseInflate gives back n bytes taken by AcquireInflate. Safe for concurrent use.
func (l *Limiter) ReleaseInflate(n int64) {
	l.noteTotal(-n) // before the release: see ReleaseBytes
	l.bytes[budgetInflate].release(n)
}

// InflateBytes returns the inflate budget's bytes held now. Safe for concurrent use.
func (l *Limiter) InflateBytes() int64 { return l.bytes[budgetInflate].used.Load() }

// MaxInflateBytes returns the inflate budget. Safe for concurrent use.
func (l *Limiter) MaxInflateBytes() int64 { return l.bytes[budgetInflate].max }

// CountStalled counts a connection of in ended for want of progress while it held bytes.
// Safe for concurrent use.
func (l *Limiter) CountStalled(in Intake) { intakeRefusedC[in][refusedStalled].Inc() }

// Budget returns the budget intake in draws from as a pipeline.Budget, for what processing and
// transcoding write (pipeline.Config.Budget, ConsumeBudget): taken without waiting, since it
// is asked on every intake's goroutine, event loops included. Its refusals are counted by
// fastpath (otlpgate_fastpath_refused_items_total{reason="intake_bytes"}), which knows the
// request, not here. It allocates: call it once. Safe for concurrent use.
func (l *Limiter) Budget(in Intake) pipeline.Budget { return &intakeBudget{l: l, in: in} }

// intakeBudget is one intake's budget of a Limiter as a pipeline.Budget.
type intakeBudget struct {
	l  *Limiter
	in Intake
}

func (b *intakeBudget) TryTake(n int64) bool { return b.l.take(b.in, n, 0, nil) }

func (b *intakeBudget) Give(n int64) { b.l.ReleaseBytes(b.in, n) }
