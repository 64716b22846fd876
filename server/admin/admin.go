package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config of the admin listener.
type Config struct {
	// Listen is the address of the HTTP listener (-admin.listen, default 127.0.0.1:8888); empty
	// turns the admin endpoints off.
	Listen string
	// ReadHeaderTimeout bounds slow clients (-admin.read-header-timeout, default 5s).
	ReadHeaderTimeout time.Duration
	// Status configures /status.json and the status page at /.
	Status StatusConfig
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8888", ReadHeaderTimeout: 5 * time.Second, Status: DefaultStatusConfig()}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("admin: bad listen address %q: %w", c.Listen, err)
	}
	if c.ReadHeaderTimeout <= 0 {
		return errors.New("admin: read header timeout must be positive")
	}
	return c.Status.Validate()
}

// runtimeRegistry holds the Go runtime's collector, with the runtime/metrics based series
// (scheduler latencies, GC pauses, heap classes) that the hot-path work is judged by, and the
// process collector. They live apart from otlpgate's own series in the default registry: the
// status sampler gathers only those, every -status.interval, and gathering the runtime's
// hundred-odd families and reading /proc each time was most of an idle process's CPU.
var runtimeRegistry = prometheus.NewRegistry()

// Gatherer is every series /metrics serves: otlpgate's and the runtime's.
var Gatherer = prometheus.Gatherers{prometheus.DefaultGatherer, runtimeRegistry}

func init() {
	prometheus.DefaultRegisterer.Unregister(collectors.NewGoCollector())
	prometheus.DefaultRegisterer.Unregister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	runtimeRegistry.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
}

// Server is the admin HTTP server.
type Server struct {
	cfg   Config
	log   *slog.Logger
	srv   *http.Server
	ln    net.Listener
	ready atomic.Pointer[func() error]
	// draining is set once shutdown began: /readyz fails from then on, whatever ready says.
	draining atomic.Bool
	done     chan struct{}

	sampler    *sampler
	stopOnce   sync.Once
	stopSample chan struct{}
	sampleDone chan struct{}
}

// New returns a server for cfg. ready, when not nil, is asked by /readyz; a nil error means ready.
func New(cfg Config, log *slog.Logger, ready func() error) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, done: make(chan struct{}), stopSample: make(chan struct{}), sampleDone: make(chan struct{})}
	g := cfg.Status.Gatherer
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	s.sampler = newSampler(cfg.Status, g, nil)
	if ready != nil {
		s.ready.Store(&ready)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", s.readyz)
	mux.HandleFunc("/status.json", s.statusJSON)
	mux.HandleFunc("/", s.page)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: cfg.ReadHeaderTimeout}
	return s, nil
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.readyErr(); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

// readyErr says why otlpgate cannot accept now, or nil.
func (s *Server) readyErr() error {
	if s.draining.Load() {
		return errors.New("shutting down")
	}
	if f := s.ready.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// LastError is a destination's latest failure, as the status shows it.
type LastError struct {
	Message string    // redacted by its source: the status shows it as given
	At      time.Time // when it happened
}

// SetLastErrors gives the status a source of each destination's last error, keyed by
// destination name; it is called once per /status.json and page view. Call before Start.
func (s *Server) SetLastErrors(f func() map[string]LastError) { s.sampler.lastErr = f }

// SetDestinations gives the status the names of the destinations configured now; it is called
// once per /status.json and page view. Without it every destination that ever had a series is
// shown. With it, a destination a reload removed is shown in state "removed" while it still
// holds queued or in-flight data, and left out once it holds nothing. Call before Start.
func (s *Server) SetDestinations(f func() []string) { s.sampler.current = f }

// sample runs the status sampler until Shutdown.
func (s *Server) sample() {
	defer close(s.sampleDone)
	runSampler(s.sampler, s.stopSample)
}

// runSampler samples until stop is closed: every Interval while someone views the status,
// every Unviewed while no one does. Gathering the metrics is most of what an idle otlpgate
// spends (with the garbage it leaves), and a tenth of what it spends at a few thousand spans a
// second: while the values stay the same the sampler gathers less and less often, up to one
// gather in idleGatherMax, and sleeps in between. The intervals it slept through are filled
// in by the next gather (take), or by a view of the status, which gathers at once when the
// values are older than an interval (refresh). A view brings it back to every interval.
func runSampler(sm *sampler, stop <-chan struct{}) {
	t := time.NewTimer(sm.cfg.Interval)
	defer t.Stop()
	sm.take(time.Now())
	quiet := 0
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			sm.wakes.Add(1)
			every := sm.cfg.unviewed()
			if sm.viewed.Swap(false) {
				quiet, every = 0, sm.cfg.Interval // someone looks: every interval while they do
			}
			// A view may have gathered within the interval; its sample stands for this one.
			if sm.stale(now) {
				if sm.take(now) {
					quiet = 0
				} else {
					quiet++
				}
			}
			t.Reset(max(every, time.Duration(idleSkip(quiet, sm.cfg)+1)*sm.cfg.Interval))
		}
	}
}

// idleGatherMax bounds how long an idle sampler goes without gathering; at most half of
// -status.down-after, so that a destination's state moves within it.
const idleGatherMax = 30 * time.Second

// idleSkip is how many intervals to repeat the last sample for after quiet gathers in a row
// found nothing changed: none after the first, then 1, 3, 7, ... up to idleGatherMax.
func idleSkip(quiet int, cfg StatusConfig) int {
	if quiet < 2 {
		return 0
	}
	most := int(min(idleGatherMax, cfg.DownAfter/2)/cfg.Interval) - 1
	return max(0, min(1<<min(quiet-1, 16)-1, most))
}

// refresh gathers now when the newest values are older than an interval (an idle sampler
// sleeps through intervals), so that a view of the status shows current figures and a chart
// with a point per interval; the sampler then gathers every interval again. Safe for
// concurrent use.
func (s *Server) refresh(now time.Time) {
	s.sampler.viewed.Store(true)
	if s.sampler.stale(now) {
		s.sampler.take(now)
	}
}

// Start listens and serves in the background; it returns once the listener is bound.
// Safe to call once, from any goroutine.
func (s *Server) Start() error {
	if s.cfg.Listen == "" {
		close(s.done)
		close(s.sampleDone)
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		close(s.sampleDone)
		return fmt.Errorf("admin: cannot listen on %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	go s.sample()
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", "err", err)
		}
	}()
	s.log.Info("admin listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the bound address, or nil before Start or when turned off.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Drain makes /readyz answer 503 from now on, so that load balancers stop routing new work
// here while the intakes finish what they have. The admin endpoints keep serving until Shutdown.
// Safe for concurrent use.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops the server, waiting for open requests and for a sample being taken up to ctx:
// it returns ctx's error when either is left running (the sample's goroutine ends once its
// gathering does). Safe for concurrent use.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	s.stopOnce.Do(func() { close(s.stopSample) })
	err := s.srv.Shutdown(ctx)
	<-s.done // Serve returns as soon as the listener is closed
	select {
	case <-s.sampleDone:
	case <-ctx.Done():
		// A sample of many destinations on a starved CPU may take longer than what is left of
		// -shutdown.timeout; nothing is lost by leaving it.
		return ctx.Err()
	}
	return err
}
