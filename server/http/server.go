package httpserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/netutil"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/rawio"
)

// Server is the OTLP/HTTP intake.
type Server struct {
	cfg     Config
	log     *slog.Logger
	hs      *fasthttp.Server
	tls     *tls.Config
	ln      atomic.Pointer[net.Listener] // set by Serve; read by Addr from other goroutines (readiness)
	token   []byte                       // expected Authorization value; empty: no check
	paths   [3]string
	dec     decoders
	replies *replies
	cors    *cors // nil: CORS off

	adm admission.Control // admission, refusal episodes, the intake limiter
	// waitCtx bounds -ack=upstream waits; it ends only when Shutdown gives up on the handlers,
	// so that a graceful shutdown still answers every request it can.
	waitCtx    context.Context
	cancelWait context.CancelFunc
	inflight   sync.WaitGroup // handlers running
	conns      struct {
		sync.Mutex
		open map[net.Conn]struct{}
	}
	served chan struct{}
}

// idleWorkerLife is how long fasthttp keeps a worker goroutine whose connection ended for the
// next one, and how often it looks for such workers (below). A parked worker lives one to two
// of it: no longer than a keep-alive connection that sends nothing is kept by default
// (-http.idle-timeout, 2m).
const idleWorkerLife = time.Minute

// New builds the server for cfg in front of p: a pipeline.Pipeline, or with a spool the
// spool's admission. Start listens.
func New(cfg Config, p pipeline.Admitter, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, served: make(chan struct{}),
		paths: [3]string{cfg.TracesPath, cfg.MetricsPath, cfg.LogsPath}, replies: newReplies(cfg), cors: newCORS(cfg)}
	s.conns.open = map[net.Conn]struct{}{}
	s.adm.Init(p, cfg.Limiter, cfg.OverloadAfter)
	s.waitCtx, s.cancelWait = context.WithCancel(context.Background())
	var err error
	if s.dec, err = newDecoders(); err != nil {
		return nil, err
	}
	tok, tc, err := cfg.files()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		s.token = []byte(tok)
	}
	s.tls = tc
	s.hs = &fasthttp.Server{
		Handler:      s.handle,
		ErrorHandler: s.handleError,
		ConnState:    s.track,
		// The listener caps connections (they wait in the backlog, as on the gRPC intake);
		// fasthttp's own cap, which answers 503 at once, is set above it so it never fires.
		Concurrency:        2 * cfg.MaxConnections,
		ReadBufferSize:     cfg.MaxHeaderBytes,
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxRequestBytes,
		// fasthttp's worker pool looks every MaxIdleWorkerDuration for workers idle that long,
		// whether a connection is open or not, and cannot be told to sleep: at its default of
		// 10 s that was an idle process's most frequent wake-up.
		MaxIdleWorkerDuration: idleWorkerLife,
		// The handler runs once the headers (and the first few KiB of the body) are in, so that
		// it takes the body's bytes from the intake limiter before the rest is read, and
		// refuses a Content-Length over -http.max-request-bytes without reading it.
		StreamRequestBody:            true,
		CloseOnShutdown:              true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		Logger:                       fasthttpLogger{log},
		// fasthttp quotes the start of a request it cannot parse in its error; that may be an
		// Authorization header, and tokens are never logged.
		SecureErrorLogMessage: true,
	}
	return s, nil
}

// fasthttpLogger sends fasthttp's own messages (connection errors; never bodies) to debug level.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug("http: " + fmt.Sprintf(format, args...))
}

// Start listens and serves in the background; it returns once the listener is bound.
func (s *Server) Start() error {
	if s.cfg.Listen == "" {
		close(s.served)
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("http: cannot listen on %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ln)
}

// Serve serves on ln in the background (tests pass their own listener).
func (s *Server) Serve(ln net.Listener) error {
	ln = netutil.LimitListener(rawio.Listen(ln), s.cfg.MaxConnections)
	s.ln.Store(&ln)
	addr := ln.Addr()
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	go func() {
		defer close(s.served)
		if err := s.hs.Serve(ln); err != nil {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	s.log.Info("http intake listening", "addr", addr.String(), "tls", s.cfg.TLSCert != "", "mtls", s.cfg.TLSClientCA != "",
		"cors", s.cors != nil)
	return nil
}

// Addr is the bound address, nil before Start.
func (s *Server) Addr() net.Addr {
	ln := s.ln.Load()
	if ln == nil {
		return nil
	}
	return (*ln).Addr()
}

// track keeps the set of open connections, to close what a timed-out shutdown leaves.
func (s *Server) track(c net.Conn, st fasthttp.ConnState) {
	s.conns.Lock()
	defer s.conns.Unlock()
	switch st {
	case fasthttp.StateNew:
		s.conns.open[c] = struct{}{}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		delete(s.conns.open, c)
	}
}

// Shutdown stops accepting connections, lets the requests being handled finish and closes
// idle connections. When ctx ends first, -ack=upstream waits are cut short (answered 503) and
// the remaining connections are closed; requests on them that were not answered are the
// client's to re-send.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln.Load() == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.hs.ShutdownWithContext(context.Background()) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Waiting handlers answer 503 now; fasthttp writes those answers with Connection: close
		// while its shutdown runs. What is still open after a moment (slow clients mid-request,
		// answers that could not be written) is closed.
		s.cancelWait()
		grace := time.NewTimer(shutdownGrace)
		select {
		case err = <-done:
		case <-grace.C:
			s.closeConns()
			err = <-done
		}
		grace.Stop()
	}
	// A shutdown that came before fasthttp's Serve registered the listener leaves Serve
	// accepting for ever: closing the listener ends it either way.
	if ln := s.ln.Load(); ln != nil {
		(*ln).Close()
	}
	s.inflight.Wait()
	s.cancelWait()
	<-s.served
	return err
}

// shutdownGrace is how long a shutdown that ran out of time still lets the handlers it woke
// write their answers before the connections are closed.
const shutdownGrace = time.Second

func (s *Server) closeConns() {
	s.conns.Lock()
	defer s.conns.Unlock()
	for c := range s.conns.open {
		c.Close()
	}
}

// overloaded records a refusal for want of space and reports whether refusals have now lasted
// longer than OverloadAfter.
func (s *Server) overloaded() bool { return s.adm.Overloaded() }
