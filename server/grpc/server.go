package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/rawio"
)

// Server is the gRPC intake.
type Server struct {
	cfg Config
	log *slog.Logger
	gs  *grpc.Server
	// ln is set once Serve runs; atomic because readiness checks read it from other goroutines
	// while the server starts.
	ln    atomic.Pointer[net.Listener]
	token string // expected "Bearer ..." value; empty: no check

	adm   admission.Control // admission, refusal episodes, the intake limiter
	conns *conns            // per-peer cap, connection registry, unfinished messages (conns.go)
	// budgetConns are the open connections with their accounts (connbudget.go), swept for
	// progress until stopSweep closes; sweeping is done once the sweep returned.
	budgetConns connSet
	stopSweep   chan struct{}
	stopOnce    sync.Once
	sweeping    sync.WaitGroup
	draining    atomic.Bool
	drain       chan struct{}  // closed when draining is set: idle streams end
	loops       sync.WaitGroup // stream loops (otep.go), which may outlive their handler briefly
	served      chan struct{}
	h2          h2Server // -grpc.transport=otlpgate (h2server.go)
}

// New builds the server for cfg in front of p: a pipeline.Pipeline, or with a spool the
// spool's admission. Start listens.
func New(cfg Config, p pipeline.Admitter, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, served: make(chan struct{}), drain: make(chan struct{}), stopSweep: make(chan struct{})}
	s.conns = newConns(&s.cfg)
	s.budgetConns.wake = newSweepWake()
	s.adm.Init(p, cfg.Limiter, cfg.OverloadAfter)
	tok, tc, err := cfg.files()
	if err != nil {
		return nil, err
	}
	s.token = tok
	if cfg.Transport == TransportOwn {
		if err := s.h2.init(&s.cfg, tc); err != nil {
			return nil, err
		}
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(answerCodec{inner: codec.New(nil)}),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.MaxHeaderListSize(uint32(cfg.MaxHeaderBytes)),
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.InitialWindowSize(cfg.InitialWindowSize),
		grpc.InitialConnWindowSize(cfg.InitialConnWindowSize),
		grpc.ReadBufferSize(cfg.ReadBufferSize),
		grpc.WriteBufferSize(cfg.WriteBufferSize),
		grpc.NumStreamWorkers(cfg.StreamWorkers),
		experimental.BufferPool(bufferPool(cfg.ZeroBuffers)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout, MaxConnectionIdle: cfg.MaxConnectionIdle,
			MaxConnectionAge: cfg.MaxConnectionAge, MaxConnectionAgeGrace: cfg.MaxConnectionAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveMinTime, PermitWithoutStream: true}),
	}
	if cfg.PassThrough != "" {
		dc, err := codec.NewWireDecompressor(cfg.PassThrough, cfg.MaxRecvMsgSize)
		if err != nil {
			return nil, fmt.Errorf("grpc: %w", err)
		}
		// The one way a server keeps a message's compressed bytes: gRPC inflates before any
		// codec runs, through the process-wide registry otherwise (codec/wire.go).
		//lint:ignore SA1019 gRPC has no other per-server decompressor; it keeps this one through 1.x
		opts = append(opts, grpc.RPCDecompressor(dc))
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(watchedCreds{credentials.NewTLS(tc)}))
	}
	s.gs = grpc.NewServer(opts...)
	for _, d := range s.serviceDescs() {
		s.gs.RegisterService(d, s)
	}
	return s, nil
}

// bufferPool is where the transport takes the buffers it reads frames into: pool/'s tiers,
// not zeroed, or with zero grpc-go's default pool, which zeroes each one (Config.ZeroBuffers).
func bufferPool(zero bool) mem.BufferPool {
	if zero {
		return mem.DefaultBufferPool()
	}
	return codec.MemPool{}
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
	// The limiter's account wraps the raw connection, and the frame watch wraps that: the watch
	// must be the connection the TLS handshake sees (conns.go), and the account is found through
	// the remote address both pass through.
	inner := netutil.LimitListener(rawio.Listen(ln), s.cfg.MaxConnections)
	if lim := s.adm.Limiter(); lim != nil {
		inner = budgetListener{Listener: inner, s: s}
		if d := lim.ProgressTimeout(); d > 0 {
			s.sweeping.Add(1)
			go func() {
				defer s.sweeping.Done()
				s.sweepProgress(d, s.stopSweep)
			}()
		}
	}
	ln = &listener{Listener: inner, cs: s.conns}
	s.ln.Store(&ln)
	go s.conns.sweep()
	if s.cfg.Transport == TransportOwn {
		go func() {
			defer close(s.served)
			defer func() { close(s.conns.stop); <-s.conns.done }()
			s.serveH2(ln)
		}()
		s.log.Info("grpc intake listening", "addr", ln.Addr().String(), "transport", TransportOwn)
		return nil
	}
	go func() {
		defer close(s.served)
		defer func() { close(s.conns.stop); <-s.conns.done }()
		// ErrServerStopped: Shutdown came before Serve began (another listener of the
		// process failed to start), which is no failure of this one.
		if err := s.gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
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
		s.gs.Stop() // never served: only the stream workers New started run
		return nil
	}
	if !s.draining.Swap(true) {
		close(s.drain)
	}
	if s.cfg.Transport == TransportOwn {
		err := s.shutdownH2(ctx)
		s.gs.Stop() // only the stream workers New started run on it
		s.stopOnce.Do(func() { close(s.stopSweep) })
		s.sweeping.Wait()
		return err
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
	s.stopOnce.Do(func() { close(s.stopSweep) })
	s.sweeping.Wait()
	return err
}

// authorize checks the bearer token of a grpc-go call when one is configured.
func (s *Server) authorize(ctx context.Context) error {
	return s.authorizeMeta(mdMeta(incomingMD(ctx)))
}

// authorizeMeta checks the bearer token in a call's headers m when one is configured.
func (s *Server) authorizeMeta(m callMeta) error {
	if s.token == "" {
		return nil
	}
	if checkToken(m, s.token) {
		return nil
	}
	return errUnauthenticated
}

var errUnauthenticated = status.Error(codes.Unauthenticated, "missing or wrong bearer token")

// overloaded records a refusal for want of space and reports whether refusals have now lasted
// longer than OverloadAfter.
func (s *Server) overloaded() bool { return s.adm.Overloaded() }

// The messages of unavailable, the same words as the HTTP intake's answers. A request that
// -ack=upstream could not deliver says so: told "overloaded", an operator would look for a
// full queue instead of a dead upstream.
const (
	msgOverloaded = "otlpgate is overloaded: retry after the given delay"
	msgUpstream   = "upstream unavailable: a destination could not deliver the request (-ack=upstream): retry after the given delay"
)

// unavailable is the status with msg that ends a call or stream under sustained overload, or
// answers a request no upstream took, with the delay the client should wait, sized from the
// queue's drain rate.
func (s *Server) unavailable(msg string) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(retryInfo(s.adm.QueueDelay())); err == nil {
		st = d
	}
	return st.Err()
}

// admit scans req, a request in layout from o (its tenant; nil: the default tenant), and
// admits it.
func (s *Server) admit(k kind, o pipeline.Origin, sig fastpath.Signal, req []byte, layout fastpath.Layout) (sc fastpath.Scan, b *pipeline.Batch, reason admission.Reason) {
	sc, err := s.scan(k, sig, req, layout)
	if err != nil {
		ctr.refuse(k, sig, admission.Invalid, 0)
		return sc, nil, admission.Invalid
	}
	b, reason = s.admitScanned(k, pipeline.Request{Signal: sig, Origin: o, Body: req, Layout: layout}, sc)
	return sc, b, reason
}

// scan counts req's bytes and checks it. A request that fails is not counted as refused here:
// the v1 intake may still admit its good entries (admitValidEntries).
func (s *Server) scan(k kind, sig fastpath.Signal, req []byte, layout fastpath.Layout) (fastpath.Scan, error) {
	ctr.bytes[k][sig].Add(float64(len(req)))
	return fastpath.ScanRequest(sig, req, layout, s.cfg.ScanDepth)
}

// admitScanned counts req, a request that passed its scan sc, as received, and admits it with
// the items the scan counted.
func (s *Server) admitScanned(k kind, req pipeline.Request, sc fastpath.Scan) (b *pipeline.Batch, reason admission.Reason) {
	req.Items = max(sc.Items, 0)
	ctr.items[k][req.Signal].Add(float64(req.Items))
	ctr.reqs[k][req.Signal].Inc()
	if sc.Resources == 0 {
		return nil, admission.Accepted
	}
	if b, reason = s.adm.Admit(req); reason != admission.Accepted {
		ctr.refuse(k, req.Signal, reason, req.Items)
	}
	return b, reason
}
