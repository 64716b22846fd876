package uds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// liveServers holds every server between New and Shutdown, for the gauges that read their own
// counters at scrape time.
var liveServers sync.Map

var (
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_uds_connections",
		Help: "Open OpenCensus client connections.",
	}, func() float64 {
		var n int64
		liveServers.Range(func(k, _ any) bool {
			n += k.(*Server).conns.Load()
			return true
		})
		return float64(n)
	})
	connectionsRejected = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_connections_rejected_total",
		Help: "Client connections closed at once because -uds.max-connections were open.",
	})
	receivedBytes = statusmetrics.Auto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_received_bytes_total",
		Help: "Bytes read from OpenCensus client connections.",
	})
)

// liveProbeTimeout bounds the dial that tells a live socket from a stale one.
const liveProbeTimeout = time.Second

// Server is the OpenCensus daemon intake: a gnet event loop on a unix socket.
type Server struct {
	cfg Config
	// path is cfg.Listen made absolute: gnet takes the socket as a URL, whose host part would
	// swallow the start of a relative path.
	path   string
	next   pipeline.Consumer
	log    *slog.Logger
	limits processLimits
	reg    *registry
	clock  clock
	// gid is the group the socket is given, -1 to leave it.
	gid int

	// Timeouts (timeout.go): sweepEvery is 0 when both are off, and nothing is watched.
	sweepEvery time.Duration
	clk        coarseClock
	watch      watchlist
	// The sweep's goroutine (sweeper) sleeps while nothing is watched: sweepAsleep is set
	// then, and the event loop that opens the next connection wakes it through sweepWake.
	sweepAsleep atomic.Bool
	sweepWake   chan struct{} // capacity 1
	sweepStop   chan struct{}
	sweepDone   chan struct{}

	conns atomic.Int64
	// closed counts connections whose close was handled (tests synchronise on it).
	closed atomic.Int64

	exportWake  chan struct{}
	exportStop  chan struct{}
	exportAbort chan struct{} // closed when Shutdown's context ends: the final export gives up
	exportDone  chan struct{}
	// chunkBytes bounds one hand-over of the exporter (exportChunkBytes; tests lower it).
	chunkBytes int

	mu struct {
		sync.Mutex
		started  bool
		shutdown bool
		engine   gnet.Engine
		// runDone is closed when gnet.Run returned.
		runDone chan struct{}
		// net serves the socket instead of gnet with EngineNet (netengine.go).
		net *netEngine
		// placed is the socket file this server moved into place (publishSocket), so that
		// Shutdown removes it and never a file another process put there since.
		placed os.FileInfo
	}
}

// New returns a server for cfg that hands what it receives to next, which must be safe for
// concurrent use (event loops and the exporter call it). It does not listen yet. Safe for
// concurrent use.
func New(cfg Config, next pipeline.Consumer, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if next == nil {
		return nil, errors.New("uds: nil consumer")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Loops == 0 {
		cfg.Loops = runtime.GOMAXPROCS(0)
	}
	var path string
	if cfg.Listen != "" {
		abs, err := filepath.Abs(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("uds: socket path %q: %w", cfg.Listen, err)
		}
		if len(abs) > maxListenPath {
			return nil, fmt.Errorf("uds: socket path %q longer than %d bytes", abs, maxListenPath)
		}
		path = abs
	}
	s := &Server{
		cfg:  cfg,
		path: path,
		next: next,
		log:  log.With("intake", "uds"),
		limits: processLimits{maxMeasures: cfg.MaxMeasures, maxViews: cfg.MaxViews, maxSeries: cfg.MaxSeries, maxString: cfg.MaxStringBytes,
			budget: &seriesBudget{max: int64(cfg.MaxSeriesTotal)}},
		clock:       realClock{},
		exportWake:  make(chan struct{}, 1),
		exportStop:  make(chan struct{}),
		exportAbort: make(chan struct{}),
		exportDone:  make(chan struct{}),
		chunkBytes:  exportChunkBytes,
		gid:         -1,
		sweepEvery:  sweepEvery(&cfg),
		sweepWake:   make(chan struct{}, 1),
		sweepStop:   make(chan struct{}),
		sweepDone:   make(chan struct{}),
	}
	s.clk.init()
	if cfg.Listen != "" && cfg.Group != "" {
		gid, err := lookupGroup(cfg.Group)
		if err != nil {
			return nil, err
		}
		s.gid = gid
	}
	s.reg = newRegistry(cfg.MaxProcesses, cfg.DefaultReportingPeriod, s.wakeExporter)
	liveServers.Store(s, struct{}{})
	return s, nil
}

// Start listens on the socket and returns once connections are accepted; the event loops and
// the metric exporter then run on their own goroutines until Shutdown. The socket is bound
// under a name beside the path, given its group and mode, and listening before it is moved to
// the path, which a stale socket file is replaced at; a socket another process listens on is an
// error. With an empty Listen it does nothing. Start may be called once; safe for concurrent
// use with Shutdown.
func (s *Server) Start(ctx context.Context) error {
	if s.cfg.Listen == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started || s.mu.shutdown {
		return errors.New("uds: Start called twice or after Shutdown")
	}
	// Held until the socket is in place (Start returns after publishSocket on either engine).
	unlock, err := lockSocketDir(ctx, s.path, s.log)
	if err != nil {
		return err
	}
	defer unlock()
	if err := prepareSocket(ctx, s.path); err != nil {
		return err
	}
	if s.cfg.Engine == EngineNet {
		ne, err := s.listenNet()
		if err != nil {
			return fmt.Errorf("uds: cannot listen on %s: %w", s.path, err)
		}
		s.mu.started, s.mu.net = true, ne
		s.startBackground()
		return nil
	}
	h := &handler{s: s, booted: make(chan gnet.Engine, 1)}
	runErr := make(chan error, 1)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		runErr <- gnet.Run(h, "unix://"+tempSocketPath(s.path),
			gnet.WithNumEventLoop(s.cfg.Loops),
			gnet.WithLoadBalancing(gnet.LeastConnections),
			gnet.WithLogger(gnetLogger{s.log}),
		)
	}()
	select {
	case eng := <-h.booted:
		s.mu.started, s.mu.engine, s.mu.runDone = true, eng, runDone
	case err := <-runErr:
		if err == nil {
			err = h.bootErr
		}
		return fmt.Errorf("uds: cannot listen on %s: %w", s.path, err)
	}
	s.startBackground()
	return nil
}

// startBackground starts the metric exporter and the timeout sweep once the socket listens.
// Called with s.mu held.
func (s *Server) startBackground() {
	go s.runExporter()
	if s.sweepEvery > 0 {
		go s.sweeper()
	} else {
		close(s.sweepDone)
	}
	loops := s.cfg.Loops
	if s.cfg.Engine == EngineNet {
		loops = 0
	}
	s.log.Info("listening", "socket", s.path, "mode", s.cfg.Mode, "group", s.cfg.Group, "engine", s.cfg.Engine, "loops", loops,
		"idle_timeout", s.cfg.IdleTimeout, "read_timeout", s.cfg.ReadTimeout)
}

// Shutdown stops accepting, closes every connection (a message cut short is counted as
// truncated), hands the pending metrics of every process to the consumer and removes the socket
// file. It returns ctx's error if that takes too long. Safe for concurrent use.
func (s *Server) Shutdown(ctx context.Context) error {
	defer liveServers.Delete(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.shutdown || !s.mu.started {
		s.mu.shutdown = true
		return nil
	}
	s.mu.shutdown = true
	close(s.sweepStop)
	<-s.sweepDone
	var err error
	if s.mu.net != nil {
		err = s.mu.net.stop(ctx)
	} else {
		// Engine.Stop polls for completion every 500 ms; stopping with a cancelled context
		// only triggers the shutdown, and runDone tells when gnet.Run has returned.
		trigger, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.mu.engine.Stop(trigger); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("uds: stopping the event loops: %w", err)
		}
		select {
		case <-s.mu.runDone:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	s.removeSocket()
	// Even when the event loops are slow to stop, the exporter flushes what it has and ends.
	// Its final export is admitted, or tried again while ctx lasts, then counted as dropped.
	close(s.exportStop)
	select {
	case <-s.exportDone:
	case <-ctx.Done():
		close(s.exportAbort)
		<-s.exportDone // the exporter only waits on its retry timer, which the abort ends
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// prepareSocket checks that the socket may go to path: nothing is there, or a stale socket file
// (nobody accepts on it), which publishSocket replaces. A live socket is an error, and anything
// that is not a socket is left alone.
func prepareSocket(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("uds: cannot inspect %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("uds: %s exists and is not a socket", path)
	}
	d := net.Dialer{Timeout: liveProbeTimeout}
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("uds: another process is listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("uds: cannot tell whether %s is in use: %w", path, err)
	}
	return nil
}

// lockSocketDir takes an exclusive flock(2) on the socket's directory for Start's check, bind
// and rename, and returns its release. Two otlpgates started on one path at once then take
// turns: the second finds the first's socket live and fails as it does beside any live socket.
// Without it both could pass the check and bind the same temporary name, the second removing
// the first's, and the first's rename would move the second's socket to the path while the
// second failed: a path to a socket nobody serves. A holder is waited for up to
// socketLockWait (or ctx). A directory this process cannot open (no read permission) is not
// locked, and the log says so: the race it guards against is rare, and the bind reports a
// missing directory.
func lockSocketDir(ctx context.Context, path string, log *slog.Logger) (unlock func(), err error) {
	dir := filepath.Dir(path)
	f, err := os.Open(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot open the socket's directory to lock it; starting without the lock, so a second otlpgate starting on the same socket at the same moment could race this one", "dir", dir, "err", err)
		}
		return func() {}, nil
	}
	deadline := time.Now().Add(socketLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the descriptor releases the lock
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("uds: cannot lock the socket's directory %s: %w", dir, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("uds: another process has held the lock of %s for %v (an otlpgate starting on a socket there?)", dir, socketLockWait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("uds: waiting for the lock of %s: %w", dir, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// socketLockWait bounds the wait for another holder of the socket directory's lock: a start
// holds it for a bind and a rename.
const socketLockWait = 10 * time.Second

// tempSocketPath is the name the socket is bound under until it is ready: hidden, beside path
// (a rename stays in its directory) and two bytes longer (maxListenPath).
func tempSocketPath(path string) string {
	dir, base := filepath.Split(path)
	return dir + "." + base + "~"
}

// testBeforePublish, when set by a test, runs once the socket listens under its temporary name
// with its group and mode, just before it is moved to the path.
var testBeforePublish func(tmp string)

// handler is the gnet event handler. Its callbacks run on the event loops and never block.
type handler struct {
	gnet.BuiltinEventEngine
	s       *Server
	booted  chan gnet.Engine
	bootErr error
}

// OnBoot runs on gnet.Run's goroutine once the socket listens under its temporary name and
// before any connection is accepted, while Start waits holding s.mu: the moment to publish it.
func (h *handler) OnBoot(eng gnet.Engine) gnet.Action {
	if err := h.s.publishSocket(); err != nil {
		h.bootErr = err
		return gnet.Shutdown
	}
	h.booted <- eng
	return gnet.None
}

// publishSocket gives the socket, listening under its temporary name, its group and
// permissions, and then moves it to the path in one rename: a client finds either no socket (or
// the stale one it replaces) or one that listens with its final mode, never a file that refuses
// connections or admits them under the mode it was created with. The group goes first, so the
// file never grants the new mode to the group it was created with. Called with s.mu held (by
// Start, which waits while gnet's OnBoot calls it).
func (s *Server) publishSocket() error {
	tmp := tempSocketPath(s.path)
	if s.gid >= 0 {
		if err := os.Lchown(tmp, -1, s.gid); err != nil {
			return fmt.Errorf("cannot give the socket to group %s: %w", s.cfg.Group, err)
		}
	}
	if err := os.Chmod(tmp, s.cfg.Mode); err != nil {
		return fmt.Errorf("cannot set mode %v: %w", s.cfg.Mode, err)
	}
	if testBeforePublish != nil {
		testBeforePublish(tmp)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("cannot move the socket into place: %w", err)
	}
	// The socket serves from here on; what it is on disk only tells Shutdown whether the path
	// is still its own.
	if fi, err := os.Lstat(s.path); err == nil {
		s.mu.placed = fi
	} else {
		s.log.Warn("cannot inspect the socket file; Shutdown will leave it", "socket", s.path, "err", err)
	}
	return nil
}

// removeSocket removes the socket file at Shutdown if it is still the one publishSocket put
// there. Called with s.mu held.
func (s *Server) removeSocket() {
	if s.mu.placed == nil {
		return
	}
	fi, err := os.Lstat(s.path)
	if err != nil || !os.SameFile(fi, s.mu.placed) {
		s.log.Warn("the socket file was replaced or removed while serving; leaving the path alone", "socket", s.path)
		return
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cannot remove the socket file", "socket", s.path, "err", err)
	}
}

// OnOpen runs on the connection's event loop.
func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if !h.s.claimConn() {
		return nil, gnet.Close
	}
	cs := newConn(h.s)
	if h.s.sweepEvery > 0 {
		cs.gc, cs.loop = c, c.EventLoop()
		h.s.watchConn(cs)
	}
	c.SetContext(cs)
	return nil, gnet.None
}

// claimConn takes a connection slot, or counts the connection rejected when -uds.max-connections
// are open. Loops accept in parallel: the slot is claimed atomically so the limit holds
// exactly. Safe for concurrent use.
func (s *Server) claimConn() bool {
	for {
		n := s.conns.Load()
		if n >= int64(s.cfg.MaxConnections) {
			connectionsRejected.Inc()
			return false
		}
		if s.conns.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// watchConn starts the timeouts of a new connection (timeout.go).
func (s *Server) watchConn(cs *conn) {
	cs.lastRead.Store(s.clk.now())
	s.watch.add(cs)
	if s.sweepAsleep.Load() {
		// The sweep sleeps, and the clock has stood still since it went to sleep: the stamp
		// would make the connection as old as the silence. Stamped with the real time
		// instead, which the sweep then keeps advancing. Read after the add: either the sweep
		// saw the connection and did not sleep, or this sees it asleep.
		cs.lastRead.Store(s.clk.advance())
		s.wakeSweep()
	}
}

// OnTraffic runs on the connection's event loop. It consumes every buffered byte: what belongs
// to an incomplete message is copied into the connection's carry buffer, so gnet's inbound
// buffer stays empty and every read is handed over as the loop's own read buffer.
func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	cs, ok := c.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	in, _ := c.Next(-1)
	receivedBytes.Add(float64(len(in)))
	cs.feed(in)
	if cs.gc != nil {
		cs.noteRead(h.s.clk.now())
	}
	return gnet.None
}

// OnClose runs on the connection's event loop.
func (h *handler) OnClose(c gnet.Conn, _ error) gnet.Action {
	if cs, ok := c.Context().(*conn); ok {
		h.s.endConn(cs, cs.gc != nil)
		c.SetContext(nil)
	}
	return gnet.None
}

// endConn handles the end of a connection, on the goroutine that owns it: a partial message is
// discarded as truncated, the process attachment and the slot are released.
func (s *Server) endConn(cs *conn, watched bool) {
	cs.closed = true
	if watched {
		s.watch.remove(cs)
	}
	cs.close()
	s.conns.Add(-1)
	s.closed.Add(1)
}

// lookupGroup resolves a group name, or a numeric gid, to a gid that exists.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		if _, numErr := strconv.Atoi(name); numErr != nil {
			return 0, fmt.Errorf("uds: socket group: %w", err)
		}
		if g, err = user.LookupGroupId(name); err != nil {
			return 0, fmt.Errorf("uds: socket group: %w", err)
		}
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil || gid < 0 {
		return 0, fmt.Errorf("uds: socket group %q has gid %q, not a number", name, g.Gid)
	}
	return gid, nil
}

// gnetLogger routes gnet's logging to slog. gnet's Fatalf is only used where a poller cannot
// be created; it is logged as an error, never exits.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
