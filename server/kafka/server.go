package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec/kafkacompress"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/credfile"
	"github.com/otlpgate/otlpgate/internal/rawio"
)

var (
	reloadsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_subscription_reloads_total",
		Help: "Reloads of -kafka.subscriptions, by result (ok, error; on error the previous subscriptions stay).",
	}, []string{"result"})
	reloadsOK    = reloadsTotal.WithLabelValues("ok")
	unservedSets = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_unserved_subscriptions_total",
		Help: "Times the clients' subscriptions were emptied because no destination takes metrics (-dest signals=): clients then push nothing until a destination takes metrics again.",
	})
	reloadsError = reloadsTotal.WithLabelValues("error")
)

// sweepEvery is how often expired instances are looked for. Expiry is also checked whenever an
// instance is looked up, so this only bounds how long a silent instance holds memory.
const sweepEvery = 15 * time.Second

// Server is the Kafka KIP-714 intake.
type Server struct {
	cfg  Config
	next pipeline.Consumer
	// serving is next's answer to whether metrics have a destination; nil: next cannot say.
	serving pipeline.Serving
	log     *slog.Logger
	dec     *kafkacompress.Decompressor
	reg     *registry
	tls     *tls.Config // nil: plain TCP
	subs    atomic.Pointer[subscriptionSet]
	// now is the clock of throttling and expiry; tests replace it before Start.
	now func() time.Time
	// sweeps counts the instance sweep's passes, for the tests.
	sweeps atomic.Int64

	advHost string // from cfg.AdvertisedAddress; empty: each connection's local address
	advPort int32

	reloadMu sync.Mutex // serialises Reload, which derives the next generation

	ln      net.Listener
	started atomic.Bool
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      struct {
		sync.Mutex
		conns  map[*conn]struct{}
		closed bool
	}
}

// New validates cfg, loads the subscriptions and returns a server that hands accepted pushes to
// next. log may be nil (slog.Default). It starts nothing; safe to call from any goroutine.
func New(cfg Config, next pipeline.Consumer, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if next == nil {
		return nil, errors.New("kafka: nil consumer")
	}
	if log == nil {
		log = slog.Default()
	}
	set, err := loadSubscriptions(&cfg, 1)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	dec, err := kafkacompress.New(cfg.TelemetryMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	s := &Server{
		cfg:  cfg,
		next: next,
		log:  log,
		dec:  dec,
		reg:  newRegistry(cfg.MaxInstances, cfg.MaxInstanceBytes),
		now:  time.Now,
		stop: make(chan struct{}),
	}
	if cfg.TLSCert != "" {
		if s.tls, err = credfile.ServerTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA); err != nil {
			return nil, fmt.Errorf("kafka: %w", err)
		}
	}
	s.serving, _ = next.(pipeline.Serving)
	s.subs.Store(s.withServed(set))
	s.mu.conns = make(map[*conn]struct{})
	if cfg.AdvertisedAddress != "" {
		if s.advHost, s.advPort, err = splitAdvertised(cfg.AdvertisedAddress); err != nil {
			return nil, err
		}
	}
	liveServers.Store(s, struct{}{})
	return s, nil
}

// Start binds cfg.Listen and serves in the background; it returns once the listener is bound.
// ctx bounds the bind only; Shutdown stops the server. With an empty Listen it does nothing.
// Call once, from any goroutine.
func (s *Server) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("kafka: server already started")
	}
	if s.cfg.Listen == "" {
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("kafka: cannot listen on %s: %w", s.cfg.Listen, err)
	}
	ln = rawio.Listen(ln)
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	s.wg.Add(2)
	go s.acceptLoop()
	go s.sweep()
	s.log.Info("kafka telemetry listening", "addr", ln.Addr().String(), "subscriptions", len(s.subs.Load().subs),
		"tls", s.tls != nil, "mtls", s.cfg.TLSClientCA != "")
	return nil
}

// Addr returns the bound address, or nil before Start or when the listener is off.
// Safe for concurrent use after Start returned.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Reload re-reads the subscriptions file and swaps the new set in; clients see the change at
// their next request (their subscription id changes if their subscriptions did). On error the
// previous set stays in force. cmd/ calls it on SIGHUP. Safe for concurrent use.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	set, err := loadSubscriptions(&s.cfg, s.subs.Load().gen+1)
	if err != nil {
		reloadsError.Inc()
		s.log.Error("kafka subscriptions not reloaded", "err", err)
		return fmt.Errorf("kafka: %w", err)
	}
	s.subs.Store(s.withServed(set))
	reloadsOK.Inc()
	s.log.Info("kafka subscriptions reloaded", "subscriptions", len(set.subs), "generation", set.gen)
	return nil
}

// withServed marks set unserved when no destination takes metrics now.
func (s *Server) withServed(set *subscriptionSet) *subscriptionSet {
	set.unserved = s.serving != nil && !s.serving.Serves(fastpath.Metrics)
	return set
}

// currentSet is the subscription set to answer with: when whether metrics have a destination
// changed since the set was made (a reload of the destinations), a new generation that says
// so, which gives every instance a new plan and subscription id, so that a client pushing under
// the old one is told UNKNOWN_SUBSCRIPTION_ID and fetches the new one at once. Safe for
// concurrent use.
func (s *Server) currentSet() *subscriptionSet {
	set := s.subs.Load()
	if s.serving == nil || s.serving.Serves(fastpath.Metrics) != set.unserved {
		return set
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	set = s.subs.Load()
	if served := s.serving.Serves(fastpath.Metrics); served == set.unserved {
		next := *set
		next.gen++
		next.unserved = !served
		s.subs.Store(&next)
		if served {
			s.log.Info("kafka: a destination takes metrics again: clients are subscribed to their metrics", "generation", next.gen)
		} else {
			unservedSets.Inc()
			s.log.Warn("kafka: no destination takes metrics (-dest signals=): clients are subscribed to none until one does", "generation", next.gen)
		}
		set = &next
	}
	return set
}

// Shutdown stops accepting, closes every connection and waits for their goroutines until ctx
// ends. A request being handled completes first; its response may not be written. Safe for
// concurrent use, once Start returned; calls after the first return nil at once.
func (s *Server) Shutdown(ctx context.Context) error {
	defer liveServers.Delete(s)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	close(s.stop)
	if s.ln != nil {
		s.ln.Close()
	}
	for _, c := range conns {
		c.nc.Close()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.reg.clear()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kafka: shutdown: %w", ctx.Err())
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.stop:
				return
			default:
			}
			// Out of descriptors and similar: wait and retry, as net/http does, instead of
			// spinning or giving up on the listener.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("kafka accept failed", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		c := newConn(s, nc)
		if !s.addConn(c) {
			nc.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.removeConn(c)
			if tc, ok := nc.(*tls.Conn); ok && !c.handshake(tc) {
				return
			}
			c.serve()
		}()
	}
}

// addConn registers c unless the server is closing or full.
func (s *Server) addConn(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	if len(s.mu.conns) >= s.cfg.MaxConnections {
		rejectedConns.Inc()
		return false
	}
	s.mu.conns[c] = struct{}{}
	return true
}

func (s *Server) removeConn(c *conn) {
	c.nc.Close()
	c.closeOut()
	if c.telemetry {
		s.reg.dropConn(c)
	}
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
}

// sweep expires instances every sweepEvery while there are any; with none it sleeps until
// one is created (registry.expire), so that a Kafka intake no client talks to wakes no thread.
func (s *Server) sweep() {
	defer s.wg.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.sweeps.Add(1)
		if !s.reg.expire(s.now()) {
			continue
		}
		t.Stop()
		select {
		case <-s.stop:
			return
		case <-s.reg.wake:
		}
		t.Reset(sweepEvery)
	}
}
