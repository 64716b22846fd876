package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

// Server is the gRPC intake.
type Server struct {
	cfg Config
	p   *fastpath.Pipeline
	log *slog.Logger
	gs  *grpc.Server
	// ln is set once Serve runs; atomic because readiness checks read it from other goroutines
	// while the server starts.
	ln    atomic.Pointer[net.Listener]
	token string // expected "Bearer ..." value; empty: no check

	// refusingSince is the unix-nano time refusals for want of queue space began, 0 while
	// requests are admitted; lastRefusal is the time of the latest refusal. Shared by every
	// call: the queue is shared too.
	refusingSince atomic.Int64
	lastRefusal   atomic.Int64
	draining      atomic.Bool
	drain         chan struct{}  // closed when draining is set: idle streams end
	loops         sync.WaitGroup // stream loops (otep.go), which may outlive their handler briefly
	served        chan struct{}
}

// New builds the server for cfg in front of p. Start listens.
func New(cfg Config, p *fastpath.Pipeline, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, p: p, log: log, served: make(chan struct{}), drain: make(chan struct{})}
	if cfg.AuthTokenFile != "" {
		tok, err := credfile.BearerToken(cfg.AuthTokenFile)
		if err != nil {
			return nil, fmt.Errorf("grpc: %w", err)
		}
		s.token = tok
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec.New(nil)),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.InitialWindowSize(cfg.InitialWindowSize),
		grpc.InitialConnWindowSize(cfg.InitialConnWindowSize),
		grpc.ReadBufferSize(cfg.ReadBufferSize),
		grpc.WriteBufferSize(cfg.WriteBufferSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout, MaxConnectionIdle: cfg.MaxConnectionIdle,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveMinTime, PermitWithoutStream: true}),
	}
	if cfg.TLSCert != "" {
		tc, err := credfile.ServerTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("grpc: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	s.gs = grpc.NewServer(opts...)
	for _, d := range s.serviceDescs() {
		s.gs.RegisterService(d, s)
	}
	return s, nil
}

// Start listens and serves in the background; it returns once the listener is bound.
func (s *Server) Start() error {
	if s.cfg.Listen == "" {
		close(s.served)
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("grpc: cannot listen on %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ln)
}

// Serve serves on ln in the background (tests pass their own listener).
func (s *Server) Serve(ln net.Listener) error {
	ln = netutil.LimitListener(ln, s.cfg.MaxConnections)
	s.ln.Store(&ln)
	go func() {
		defer close(s.served)
		if err := s.gs.Serve(ln); err != nil {
			s.log.Error("grpc server stopped", "err", err)
		}
	}()
	s.log.Info("grpc intake listening", "addr", ln.Addr().String(), "tls", s.cfg.TLSCert != "", "mtls", s.cfg.TLSClientCA != "")
	return nil
}

// Addr is the bound address, nil before Start. Safe for concurrent use, also with Start.
func (s *Server) Addr() net.Addr {
	ln := s.ln.Load()
	if ln == nil {
		return nil
	}
	return (*ln).Addr()
}

// Shutdown stops taking calls. A stream waiting for its next request ends at once; a stream
// handling a request ends once it answered it; either way it first sends the answers it owes
// (with -ack=upstream, once the upstream answered). Unary calls finish. Connections still open
// when ctx ends are closed, and an error says so: requests on them that were not answered are the
// client's to re-send (admitted ones are still delivered). Call once; safe for concurrent use
// with the handlers.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln.Load() == nil {
		return nil
	}
	if !s.draining.Swap(true) {
		close(s.drain)
	}
	stopped := make(chan struct{})
	go func() {
		s.gs.GracefulStop()
		close(stopped)
	}()
	var err error
	select {
	case <-stopped:
	case <-ctx.Done():
		s.gs.Stop()
		<-stopped
		err = fmt.Errorf("grpc: calls still open when the shutdown deadline passed were cut: %w", ctx.Err())
	}
	<-s.served
	s.loops.Wait() // every handler returned, so every stream's context ended and its loop with it
	return err
}

// authorize checks the bearer token when one is configured.
func (s *Server) authorize(ctx context.Context) error {
	if s.token == "" {
		return nil
	}
	if checkToken(ctx, s.token) {
		return nil
	}
	return errUnauthenticated
}

var errUnauthenticated = status.Error(codes.Unauthenticated, "missing or wrong bearer token")

// overloaded records a refusal for want of space and reports whether refusals have now lasted
// longer than OverloadAfter.
func (s *Server) overloaded() bool { return s.overloadedAt(time.Now().UnixNano()) }

// overloadedAt is overloaded at the unix-nano time now. A refusal episode ends when a request
// is admitted, and also when no refusal came for longer than OverloadAfter: the queue then had
// room, or nobody asked. Without the second rule an episode that ended without a later
// admission (the clients went quiet) would stay open, and the first refusal after a long quiet
// period would skip the grace altogether.
func (s *Server) overloadedAt(now int64) bool {
	last := s.lastRefusal.Swap(now)
	since := s.refusingSince.Load()
	if since == 0 || time.Duration(now-last) > s.cfg.OverloadAfter {
		// Racing refusals start the episode once; a lost race sees a time at most as old.
		if !s.refusingSince.CompareAndSwap(since, now) {
			since = s.refusingSince.Load()
		} else {
			since = now
		}
	}
	return time.Duration(now-since) >= s.cfg.OverloadAfter
}

// unavailable is the status that ends a call or stream under sustained overload, with the delay
// the client should wait, sized from the queue's drain rate.
func (s *Server) unavailable() error {
	st := status.New(codes.Unavailable, "otlpgate is overloaded: retry after the given delay")
	if d, err := st.WithDetails(retryInfo(s.p.RetryDelay())); err == nil {
		st = d
	}
	return st.Err()
}

// admit scans req and admits it. reason is -1 when the request was admitted (or empty).
func (s *Server) admit(k kind, sig fastpath.Signal, req []byte, layout fastpath.Layout) (sc fastpath.Scan, b *fastpath.Batch, reason int) {
	ctr.bytes[k][sig].Add(float64(len(req)))
	sc, err := fastpath.ScanRequest(sig, req, layout, s.cfg.ScanDepth)
	if err != nil {
		ctr.refuse(k, sig, refusedInvalid, 0)
		return sc, nil, refusedInvalid
	}
	items := max(sc.Items, 0)
	ctr.items[k][sig].Add(float64(items))
	if sc.Resources == 0 {
		return sc, nil, -1
	}
	b, err = s.p.Admit(sig, req, items, layout)
	if err == nil {
		if s.refusingSince.Load() != 0 {
			s.refusingSince.Store(0)
		}
		return sc, b, -1
	}
	reason = reasonOf(err)
	ctr.refuse(k, sig, reason, items)
	return sc, nil, reason
}

// reasonOf maps an admission error to a refusal reason.
func reasonOf(err error) int {
	switch {
	case errors.Is(err, fastpath.ErrFull):
		return refusedFull
	case errors.Is(err, fastpath.ErrTooLarge):
		return refusedTooLarge
	case errors.Is(err, fastpath.ErrClosed):
		return refusedClosed
	}
	// The re-tag found what a scan at a shallower depth let through.
	return refusedInvalid
}

// await waits for an upstream batch and reports the refusal reason, -1 when delivered.
func await(ctx context.Context, b *fastpath.Batch) int {
	if b == nil {
		return -1
	}
	ok, err := b.Wait(ctx)
	b.Unref()
	switch {
	case err != nil:
		return refusedTimeout
	case !ok:
		return refusedUpstream
	}
	return -1
}
