package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
	"github.com/otlpgate/otlpgate/server/admin"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
	httpserver "github.com/otlpgate/otlpgate/server/http"
	"github.com/otlpgate/otlpgate/server/kafka"
	"github.com/otlpgate/otlpgate/server/kafkaconsume"
	"github.com/otlpgate/otlpgate/server/uds"
	"github.com/otlpgate/otlpgate/spool"
	"github.com/otlpgate/otlpgate/spool/feed"
)

// Gateway is one otlpgate: intakes, pipeline, destinations and admin endpoints, built from a
// Config. New builds it, Start serves, Shutdown stops it in order.
type Gateway struct {
	cfg Config
	log *slog.Logger

	lim   *admission.Limiter
	in    admitter           // what every intake admits into: p, or the spool's admission
	p     *pipeline.Pipeline // nil with a spool
	spool *spool.Spool       // nil without a spool
	sa    *feed.Admission    // the spool's admission (in), nil without a spool

	gs   *grpcserver.Server
	hs   *httpserver.Server
	ks   *kafka.Server
	kc   *kafkaconsume.Consumer // nil when -kafka.consume.brokers is not given
	us   *uds.Server
	adm  *admin.Server
	prof *admin.Listener

	// dmu guards the destination set, which reloads change (destinations.go, destfile.go).
	dmu struct {
		sync.Mutex
		members []*member
		// parked maps a destination's name to the end of the drain of its instance that a
		// reload removed, with a spool: the name's next instance resumes after it.
		parked map[string]chan struct{}
		closed bool      // Shutdown began: reloads change nothing any more
		seen   fileState // DestFile as last read
	}
	// retiring counts the drains of destinations a reload removed or replaced, and the
	// resumptions waiting for them; retireCtx ends them when Shutdown's time is up.
	retiring     sync.WaitGroup
	retireCtx    context.Context
	retireCancel context.CancelFunc
	lostMu       sync.Mutex
	reloadLost   []error        // what those drains could not deliver (without a spool)
	stopPoll     chan struct{}  // closed by Shutdown: the pollers of files (pollFile) end
	pollers      sync.WaitGroup // the pollers of files
	secretsWake  chan struct{}  // a reload happened: the secrets poller, asleep, looks again
	secretPolls  atomic.Int64   // the secrets poller's passes, for the tests

	failed    chan struct{} // closed when the spool failed (watchSpool)
	stopWatch chan struct{}
	watchDone chan struct{}
	watching  bool  // watchSpool runs
	failure   error // the spool's failure; written by watchSpool before it ends
	started   bool
	shutOnce  sync.Once
	shutErr   error

	// tally adds up what every upstream destination delivered and dropped since the start,
	// those a reload removed included, for the stop line (shutdown.go).
	tally client.Tally
}

// admitter is what every intake admits into: a pipeline.Pipeline, or with a spool the spool's
// admission (spool/feed), which the shutdown seals and closes alike.
type admitter interface {
	pipeline.Admitter
	pipeline.Consumer
	Flush()
	QueuedBytes() int64
	Close()
}

// intake is a server that takes data in; Shutdown stops it accepting and hands what it took
// to the pipeline.
type intake interface {
	Shutdown(ctx context.Context) error
}

// registerCompressors makes gRPC's process-wide compressors once: the first gateway of a
// process binds their decompression to its intake limiter's inflate budget. gRPC's registry may
// not change while calls run, and a process runs one gateway (tests that start several share
// the first one's budget).
var registerCompressors struct {
	once sync.Once
	err  error
}

// New builds the gateway cfg describes, logging to log. Nothing listens until Start. On an
// error, whatever was built is released.
func New(cfg Config, log *slog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// GOMAXPROCS is left to the runtime, which follows the cgroup CPU limit and keeps it current.
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	log.Info("otlpgate starting", "gomaxprocs", runtime.GOMAXPROCS(0), "go", runtime.Version(),
		"ack", cfg.Pipeline.Ack.String(), "queue_max_bytes", cfg.Pipeline.QueueMaxBytes)
	g := &Gateway{cfg: cfg, log: log, failed: make(chan struct{}), stopWatch: make(chan struct{}), watchDone: make(chan struct{}),
		stopPoll: make(chan struct{}), secretsWake: make(chan struct{}, 1)}
	g.dmu.parked = map[string]chan struct{}{}
	g.retireCtx, g.retireCancel = context.WithCancel(context.Background())
	// One intake limiter bounds what every intake holds before admission, as the queue does
	// after; gRPC messages inflate into its inflate budget, so it exists before the
	// compressors are registered (before any server or client).
	g.lim = admission.NewLimiter(cfg.Intake)
	registerCompressors.once.Do(func() {
		cc := codec.DefaultConfig()
		cc.Budget, cc.InflateClaim = grpcserver.InflateBudget(g.lim), cfg.GRPC.MaxRecvMsgSize
		registerCompressors.err = codec.RegisterCompressorsWith(cc)
	})
	if err := registerCompressors.err; err != nil {
		return nil, err
	}
	if err := g.build(); err != nil {
		g.release()
		return nil, err
	}
	return g, nil
}

// build makes every part, in the order they depend on one another.
func (g *Gateway) build() error {
	cfg, log := g.cfg, g.log
	configs, body, err := cfg.startDestinations()
	if err != nil {
		return err
	}
	if cfg.DestFile != "" {
		g.dmu.seen = fileState{body: body}
	}
	// The tenant table goes to the pipeline, the spool's admission and feeders (g.cfg, which
	// reloads build feeders from) and the intakes.
	if err := g.cfg.buildTenants(configs); err != nil {
		return err
	}
	if err := g.cfg.buildRoutes(configs); err != nil {
		return err
	}
	// The processing steps in force, which a reload replaces (SetProcessor).
	g.cfg.Pipeline.Steps = pipeline.NewSteps(g.cfg.Pipeline.Processor)
	cfg = g.cfg
	var ms []*member
	defer func() { g.dmu.members = ms }() // release stops what was built, also on an error
	for _, c := range configs {
		m, err := g.upstream(c)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	for _, d := range cfg.Extra {
		ms = append(ms, &member{name: d.Name(), dest: d})
	}
	if len(ms) == 0 {
		file, err := filedest.New(cfg.File, log)
		if err != nil {
			return err
		}
		ms = append(ms, &member{name: file.Name(), dest: file, out: file, queue: cfg.File.QueueBytes})
		log.Info("destination", "name", file.Name(), "protocol", client.ProtocolFile, "path", cfg.File.Path)
	}

	// What processing writes (-resource.set, sampling's trace_states) past a request's own
	// size is charged to the intake limiter's budget of the intake the request came from, as
	// the body it was made from is: the intakes that answer each request (gRPC, HTTP) admit,
	// the others (Kafka, UDS) consume.
	cfg.Pipeline.Budget, cfg.Pipeline.ConsumeBudget = g.lim.Budget(admission.IntakeHTTP), g.lim.Budget(admission.IntakeKafka)
	if cfg.Spool.Dir != "" {
		names := make([]string, len(ms))
		for i, m := range ms {
			if m.key == "" {
				m.key = m.name // Extra and the file: the spool knows them by name
			}
			names[i] = m.key
		}
		// With -compression.passthrough, requests that arrived compressed are spooled as they
		// arrived, for the feeders of destinations that send them so.
		cfg.Spool.Encoded = cfg.Pipeline.PassThrough
		if g.spool, err = openSpool(cfg, names, log); err != nil {
			return err
		}
		for i, m := range ms {
			if err := g.newFeeder(m, g.spool.Reader(m.key), i, len(ms)); err != nil {
				return err
			}
			m.resumed = make(chan struct{})
			close(m.resumed)
		}
		if g.sa, err = feed.NewAdmission(cfg.Pipeline, g.spool); err != nil {
			return err
		}
		g.sa.SetDestinations(dests(ms))
		g.in = g.sa
	} else {
		if g.p, err = pipeline.New(cfg.Pipeline, dests(ms)); err != nil {
			return err
		}
		g.in = g.p
	}
	cfg.GRPC.Limiter, cfg.HTTP.Limiter, cfg.Kafka.Limiter, cfg.UDS.Limiter = g.lim, g.lim, g.lim, g.lim
	if !cfg.Pipeline.PassThrough {
		cfg.GRPC.PassThrough = "" // nothing would use the compressed bytes: do not keep them
	}
	if g.gs, err = grpcserver.New(cfg.GRPC, g.in, log); err != nil {
		return err
	}
	if g.hs, err = httpserver.New(cfg.HTTP, g.in, log); err != nil {
		return err
	}
	if g.ks, err = kafka.New(cfg.Kafka, g.in, log); err != nil {
		return err
	}
	if g.us, err = uds.New(cfg.UDS, g.in, log); err != nil {
		return err
	}
	// The consumer commits a record's offset once it is delivered: the pipeline's batch tells
	// it when, whatever -ack says; with a spool, once the record is spooled.
	cfg.KafkaConsume.Tenants = cfg.Pipeline.Tenants
	cfg.KafkaConsume.Limiter = g.lim
	var consumeIn kafkaconsume.Admitter = g.p
	if g.sa != nil {
		consumeIn = spooledConsume{g.sa, g.spool}
	}
	if g.kc, err = kafkaconsume.New(cfg.KafkaConsume, consumeIn, log); err != nil {
		return err
	}
	for _, in := range []struct{ name, addr string }{{"grpc", cfg.GRPC.Listen}, {"http", cfg.HTTP.Listen}, {"kafka", cfg.Kafka.Listen}, {"uds", cfg.UDS.Listen}} {
		if in.addr != "" {
			cfg.Admin.Status.Intakes = append(cfg.Admin.Status.Intakes, in.name)
		}
	}
	if g.kc != nil {
		cfg.Admin.Status.Intakes = append(cfg.Admin.Status.Intakes, "kafka_consume")
	}
	if cfg.Admin.Status.Gatherer == nil {
		cfg.Admin.Status.Gatherer = statusmetrics.Registry
	}
	if g.adm, err = admin.New(cfg.Admin, log, g.ready); err != nil {
		return err
	}
	// The status page's last error per destination: each client.Dest and client.Fleet keeps its own.
	g.adm.SetLastErrors(g.lastErrors)
	g.adm.SetDestinations(g.destNames)
	// Profiles only when asked for, on loopback; the listener lives until the end of Shutdown,
	// so that a shutdown can be profiled too.
	if g.prof, err = admin.NewPprof(cfg.Pprof, log); err != nil {
		return err
	}
	return nil
}

// release gives back what a failed New built: nothing was admitted, so nothing can be lost.
func (g *Gateway) release() {
	if g.in != nil {
		g.in.Close()
	}
	if g.gs != nil {
		g.gs.Shutdown(context.Background()) // its stream workers run from New on
	}
	if g.ks != nil {
		g.ks.Shutdown(context.Background())
	}
	if g.us != nil {
		g.us.Shutdown(context.Background())
	}
	g.kc.Shutdown(context.Background()) // nil-safe; never started here
	for _, m := range g.dmu.members {
		if m.feeder != nil {
			m.feeder.Stop()
		}
	}
	for _, m := range g.dmu.members {
		if m.out != nil {
			m.out.Shutdown(context.Background())
		}
	}
	if g.spool != nil {
		g.spool.Close()
	}
	g.retireCancel()
}

// Start starts the destinations and the listeners; it returns once every listener is bound.
// ctx bounds the binding only. On an error, everything is stopped again (Shutdown need not be
// called, and returns the same error).
func (g *Gateway) Start(ctx context.Context) error {
	g.started = true
	g.dmu.Lock()
	for _, m := range g.dmu.members {
		m.start()
	}
	g.dmu.Unlock()
	if g.spool != nil {
		g.watching = true
		go g.watchSpool()
	}
	err := g.listen(ctx)
	if err == nil && g.cfg.DestFile != "" && g.cfg.DestFilePoll > 0 {
		g.pollDestFile()
	}
	if err == nil && g.cfg.SecretsPoll > 0 {
		g.pollSecrets()
	}
	if err != nil {
		g.shutOnce.Do(func() {
			g.shutdown(context.Background())
			g.shutErr = err
		})
	}
	return err
}

// listen binds the listeners, admin first so that /readyz answers (not ready) while the
// intakes come up.
func (g *Gateway) listen(ctx context.Context) error {
	if err := g.adm.Start(); err != nil {
		return err
	}
	if err := g.prof.Start(); err != nil {
		return err
	}
	if err := g.gs.Start(); err != nil {
		return err
	}
	if err := g.hs.Start(); err != nil {
		return err
	}
	if err := g.ks.Start(ctx); err != nil {
		return err
	}
	// gnet creates the socket file with the process umask, and its mode and group are set
	// just after: a tight umask closes the window in which another user could connect.
	old := syscall.Umask(0o177)
	err := g.us.Start(ctx)
	syscall.Umask(old)
	if err != nil {
		return err
	}
	return g.kc.Start()
}

// spooledConsume is the spool's admission as the Kafka consumer's: a record is durable once
// Consume returned, so there is no batch to wait for.
type spooledConsume struct {
	a     *feed.Admission
	spool *spool.Spool
}

// Fill implements kafkaconsume.Admitter: with a spool, the spool is the queue, less the segment
// being written, which no delivery frees before the consumer's own appends fill it.
func (s spooledConsume) Fill() (used, limit int64) { return s.spool.Fill() }

// AdmitDelivered implements kafkaconsume.Admitter.
func (s spooledConsume) AdmitDelivered(req pipeline.Request) (*pipeline.Batch, error) {
	return nil, s.a.Consume(req)
}

// RetryDelay implements kafkaconsume.Admitter.
func (s spooledConsume) RetryDelay() time.Duration { return s.a.RetryDelay() }

// watchSpool closes failed when the spool fails: acknowledged records may be gone and it takes
// no more, so the gateway must stop, and say so (Shutdown's LossError).
func (g *Gateway) watchSpool() {
	defer close(g.watchDone)
	select {
	case <-g.spool.Failed():
		g.failure = g.spool.Err()
		g.log.Error("spool failed: acknowledged data may be lost; shutting down", "dir", g.cfg.Spool.Dir, "err", g.failure)
		close(g.failed)
	case <-g.stopWatch:
	}
}

// Failed is closed when the gateway cannot go on (the spool failed); Shutdown then returns a
// LossError. Safe for concurrent use.
func (g *Gateway) Failed() <-chan struct{} { return g.failed }

// Reload does what SIGHUP asks: with -dest.file, a -dest header-file or bearer-token-file, the
// destinations are read again and the difference applied (destfile.go); the balanced
// destinations resolve their backends again; -auth.tenants-file is read again (tenants.go); the
// Kafka intake, when on, re-reads its subscriptions. Each failure is logged and keeps what ran
// before; the error joins them. Safe for concurrent use.
func (g *Gateway) Reload() error { return g.reload(nil, false) }

// ReloadWith is Reload with dests, the -dest values of a configuration read again (a config
// file), in place of the running ones: the destinations are applied as -dest.file's are, whole
// or not at all, and applied reports whether dests run now. A change that cannot be applied
// (otlpgate started without a destination) is refused; dests as they run change nothing.
// Destinations with match-header or match=resource routes keep theirs wherever they move in
// the list. Each call counts once,
// in otlpgate_config_reloads_total or, when the destinations were refused,
// otlpgate_config_reload_failures_total. Must not be called concurrently with itself.
func (g *Gateway) ReloadWith(dests []string) (applied bool, err error) {
	err = g.reload(dests, true)
	g.dmu.Lock()
	applied = slices.Equal(g.cfg.Dests, dests)
	g.dmu.Unlock()
	return applied, err
}

func (g *Gateway) reload(dests []string, replace bool) error {
	defer g.secretsReloaded()
	var errs []error
	// The -dest flags' files are read again too: a header-file's value, a bearer token.
	secretFile := func(spec string) bool {
		s, err := client.ReadDest(spec)
		return err == nil && (s.Given().Has("header-file") || s.Given().Has("bearer-token-file"))
	}
	g.dmu.Lock()
	running := g.cfg.Dests
	g.dmu.Unlock()
	secretFiles := slices.ContainsFunc(running, secretFile) || slices.ContainsFunc(dests, secretFile) ||
		slices.ContainsFunc(g.cfg.Destinations, func(d client.Config) bool { return d.BearerTokenFile != "" })
	// A list as it runs changes nothing by itself: the destinations are read again only for
	// what they name.
	fromConfig := replace
	replace = replace && !slices.Equal(dests, running)
	if g.cfg.DestFile != "" || secretFiles || replace {
		if err := g.reloadDestFile("reload", dests, replace, fromConfig); err != nil {
			errs = append(errs, err)
		}
	} else if fromConfig {
		configReloads.Inc() // the configuration's destinations, as they run
	}
	g.dmu.Lock()
	var fleets []*client.Fleet
	for _, m := range g.dmu.members {
		if f, ok := m.out.(*client.Fleet); ok {
			fleets = append(fleets, f)
		}
	}
	g.dmu.Unlock()
	for _, f := range fleets {
		if err := f.Reload(); err != nil {
			g.log.Error("cannot resolve the backends; keeping the current set", "destination", f.Name(), "err", err)
			errs = append(errs, err)
		}
	}
	if g.cfg.TenantsFile != "" {
		if err := g.reloadTenantsFile(); err != nil {
			errs = append(errs, err)
		}
	}
	// Without the Kafka intake there are no subscriptions to reload, and a line saying they were
	// would send whoever reads the log after a change that SIGHUP did not make.
	if g.cfg.Kafka.Listen != "" {
		if err := g.ks.Reload(); err != nil {
			g.log.Error("cannot reload the Kafka subscriptions; keeping the old ones", "err", err)
			errs = append(errs, err)
		} else {
			g.log.Info("reloaded the Kafka subscriptions")
		}
	}
	if g.cfg.DestFile == "" && !secretFiles && !fromConfig && len(fleets) == 0 && g.cfg.TenantsFile == "" && g.cfg.Kafka.Listen == "" {
		g.log.Info("nothing to reload: no -config, -dest.file, header-file or bearer-token-file, no balanced destination (resolver=), no -auth.tenants-file and no Kafka intake; other flags take a restart")
	}
	return errors.Join(errs...)
}

// SetProcessor replaces the processing steps (-resource.*, -drop, -sample.*; nil: none) while
// otlpgate runs: every request prepared from now on runs through p, whole, whichever intake
// it came from, spooled or not. Safe for concurrent use.
func (g *Gateway) SetProcessor(p pipeline.Processor) { g.cfg.Pipeline.Steps.Set(p) }

// SetTenantRate replaces the rate every tenant is limited to (-tenant.rate, -tenant.burst)
// while otlpgate runs (tenant.Table.SetRate). Without tenants (-intake.headers) there is no
// table to limit: a rate is refused, since turning tenants on takes a restart. Safe for
// concurrent use.
func (g *Gateway) SetTenantRate(r tenant.Rate) error {
	ts := g.cfg.Pipeline.Tenants
	if ts == nil {
		if r.On() {
			return errors.New("-tenant.rate limits each tenant: otlpgate started without -intake.headers, and tenants take a restart")
		}
		return nil
	}
	return ts.SetRate(r)
}

// Pipeline is the gateway's pipeline, for tests and benchmarks that admit requests without an
// intake or watch its queue; nil with a spool, whose admission writes to the log instead.
// Safe for concurrent use.
func (g *Gateway) Pipeline() *pipeline.Pipeline { return g.p }

// GRPCAddr is the OTLP/gRPC intake's bound address, nil when it is off or not started.
// Safe for concurrent use.
func (g *Gateway) GRPCAddr() net.Addr { return g.gs.Addr() }

// HTTPAddr is the OTLP/HTTP intake's bound address, nil when it is off or not started.
func (g *Gateway) HTTPAddr() net.Addr { return g.hs.Addr() }

// KafkaAddr is the Kafka intake's bound address, nil when it is off or not started.
func (g *Gateway) KafkaAddr() net.Addr { return g.ks.Addr() }

// AdminAddr is the admin listener's bound address, nil when it is off or not started.
func (g *Gateway) AdminAddr() net.Addr { return g.adm.Addr() }

// PprofAddr is the profiling listener's bound address, nil when it is off or not started.
func (g *Gateway) PprofAddr() net.Addr { return g.prof.Addr() }

// destNames are the names of the destinations configured now, for the status page.
func (g *Gateway) destNames() []string {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	names := make([]string, 0, len(g.dmu.members))
	for _, m := range g.dmu.members {
		names = append(names, m.name)
	}
	return names
}

// lastErrors is each destination's latest failure, for the status page; destinations that never
// failed are left out. Those a reload removed are gone from it.
func (g *Gateway) lastErrors() map[string]admin.LastError {
	g.dmu.Lock()
	outs := make([]pipeline.Destination, 0, len(g.dmu.members))
	for _, m := range g.dmu.members {
		outs = append(outs, m.dest)
	}
	g.dmu.Unlock()
	m := map[string]admin.LastError{}
	for _, o := range outs {
		if d, ok := o.(interface {
			Name() string
			LastError() (string, time.Time)
		}); ok {
			if msg, at := d.LastError(); msg != "" {
				m[d.Name()] = admin.LastError{Message: msg, At: at}
			}
		}
	}
	return m
}
