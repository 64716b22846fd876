package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/otlpgate/otlpgate/process"
	"github.com/otlpgate/otlpgate/server/admin"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
	httpserver "github.com/otlpgate/otlpgate/server/http"
	"github.com/otlpgate/otlpgate/server/kafka"
	"github.com/otlpgate/otlpgate/server/uds"
	"github.com/otlpgate/otlpgate/spool"
	"github.com/otlpgate/otlpgate/spool/feed"
)

// config is everything the flags set.
type config struct {
	grpc      grpcserver.Config
	http      httpserver.Config
	authToken string // -auth.token-file: both intakes unless one has its own
	corsOrig  string
	corsHdrs  string
	pipeline  fastpath.Config
	intake    fastpath.LimiterConfig
	file      filedest.Config
	admin     admin.Config
	pprof     admin.PprofConfig
	kafka     kafka.Config
	uds       uds.Config
	udsMode   string
	kafkaMets string
	dests     []string
	clients   []client.Config
	warnings  []string // configurations that work but may surprise
	ack       string
	scanDepth string
	logLevel  string
	logFormat string
	shutdown  time.Duration
	spool     spool.Config // Dir empty: no spool
	spoolSync string
	spoolFull string
	// spoolGroupReadable: -spool.group-readable, for spool.OSFS.
	spoolGroupReadable bool
	// spoolFS is the spool's file system: nil is spool.OSFS; tests put a failing one here.
	spoolFS spool.FS
	// The processing steps (process/): -resource.set, -resource.delete, -drop, -sample.*.
	procSet, procDelete, procDrop []string
	sampleTraces, sampleMode      string
	sampleSeed                    uint32
	sampleSeedSet                 bool
	proc                          process.Config
	// Tenants: -intake.headers (a comma-separated list), -intake.headers.default,
	// -intake.max-tenants, and the destinations' match-header (tenants.go).
	tenantHeaders           string
	tenantRate, tenantBurst string // -tenant.rate, -tenant.burst
	tenants                 fastpath.TenantsConfig
}

func defaultConfig() config {
	return config{
		grpc:       grpcserver.DefaultConfig(),
		http:       httpserver.DefaultConfig(),
		pipeline:   fastpath.DefaultConfig(),
		intake:     fastpath.DefaultLimiterConfig(),
		file:       filedest.DefaultConfig(),
		admin:      admin.DefaultConfig(),
		pprof:      admin.DefaultPprofConfig(),
		kafka:      kafka.DefaultConfig(),
		uds:        uds.DefaultConfig(),
		udsMode:    "0660",
		kafkaMets:  "*",
		ack:        "accept",
		scanDepth:  "full",
		logLevel:   "info",
		logFormat:  "text",
		shutdown:   30 * time.Second,
		spool:      spool.DefaultConfig(),
		spoolSync:  spool.DefaultConfig().Sync.String(),
		spoolFull:  spool.DefaultConfig().Full.String(),
		sampleMode: "hash_seed",
		tenants:    fastpath.DefaultTenantsConfig(),
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr *os.File) int {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("otlpgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	registerFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	log, err := newLogger(cfg.logLevel, cfg.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "otlpgate:", err)
		return exitUsage
	}
	if err := finishConfig(&cfg); err != nil {
		log.Error("bad configuration", "err", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		var lost *lossError
		if errors.As(err, &lost) {
			return exitLost // each loss was logged where it was found
		}
		log.Error("otlpgate failed", "err", err)
		return exitFailed
	}
	return exitOK
}

func newLogger(level, format string, w *os.File) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad -log.level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("bad -log.format %q (want text or json)", format)
}

// finishConfig turns the string-valued flags into typed settings and validates everything.
func finishConfig(cfg *config) error {
	cfg.warnings = nil
	var err error
	if cfg.pipeline.Ack, err = fastpath.ParseAckMode(cfg.ack); err != nil {
		return err
	}
	if cfg.grpc.ScanDepth, err = fastpath.ParseDepth(cfg.scanDepth); err != nil {
		return err
	}
	cfg.http.ScanDepth = cfg.grpc.ScanDepth
	if cfg.authToken != "" {
		if cfg.grpc.AuthTokenFile == "" {
			cfg.grpc.AuthTokenFile = cfg.authToken
		}
		if cfg.http.AuthTokenFile == "" {
			cfg.http.AuthTokenFile = cfg.authToken
		}
	}
	cfg.http.CORSAllowedOrigins = splitList(cfg.corsOrig)
	cfg.http.CORSAllowedHeaders = splitList(cfg.corsHdrs)
	cfg.kafka.DefaultMetrics = splitList(cfg.kafkaMets)
	mode, err := strconv.ParseUint(cfg.udsMode, 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("bad -uds.mode %q (want octal permissions such as 0660)", cfg.udsMode)
	}
	cfg.uds.Mode = os.FileMode(mode)
	names := map[string]bool{}
	for _, spec := range cfg.dests {
		base := client.DefaultConfig()
		if !specHasKey(spec, "queue-bytes") {
			// Unless told otherwise, a destination may hold what the pipeline admits: a single
			// destination then never refuses a batch at hand-over (overload shows as backpressure
			// to clients, and nothing acknowledged is dropped); several split the budget, so that a
			// dead one cannot stall the others.
			base.QueueBytes = cfg.pipeline.QueueMaxBytes
			if len(cfg.dests) > 1 {
				base.QueueBytes = cfg.pipeline.QueueMaxBytes / 2
			}
		}
		if cfg.spool.Dir != "" {
			if specHasKey(spec, "retry-max-elapsed") {
				return fmt.Errorf("-dest %q: retry-max-elapsed cannot be combined with -spool.dir: spooled data is retried until the spool is full", client.RedactDest(spec))
			}
			// Data on disk is never given up because a retry budget ran out.
			base.RetryMaxElapsed = 0
		}
		c, err := client.ParseDest(spec, base)
		if err != nil {
			return fmt.Errorf("-dest %q: %w", client.RedactDest(spec), err)
		}
		if names[c.Name] {
			return fmt.Errorf("-dest: two destinations are named %q", c.Name)
		}
		names[c.Name] = true
		cfg.clients = append(cfg.clients, c)
	}
	if len(cfg.clients) == 1 && cfg.clients[0].QueueBytes < cfg.pipeline.QueueMaxBytes {
		cfg.warnings = append(cfg.warnings, fmt.Sprintf("-dest %s: queue-bytes below -queue.max-bytes: under overload, batches already acknowledged to clients can be refused at hand-over (counted in otlpgate_fastpath_destination_refused_batches_total)", cfg.clients[0].Name))
	}
	if len(cfg.clients) > 1 {
		// Every batch counts against -queue.max-bytes until each destination is done with it: a
		// dead destination allowed to hold as much would stall the others.
		for _, c := range cfg.clients {
			if c.QueueBytes >= cfg.pipeline.QueueMaxBytes {
				return fmt.Errorf("-dest %s: queue-bytes %d must be below -queue.max-bytes %d when there are several destinations, or a dead one could stall the rest",
					c.Name, c.QueueBytes, cfg.pipeline.QueueMaxBytes)
			}
		}
	}
	if cfg.shutdown <= 0 {
		return errors.New("-shutdown.timeout must be positive")
	}
	if err := finishSpoolConfig(cfg); err != nil {
		return err
	}
	if err := finishProcessConfig(cfg, os.LookupEnv); err != nil {
		return err
	}
	if err := finishTenantConfig(cfg); err != nil {
		return err
	}
	if err := cfg.intake.Validate(); err != nil {
		return err
	}
	// The servers check their sizes against the limiter again; these name the flags.
	in := fastpath.NewLimiter(cfg.intake)
	if m := int64(cfg.grpc.MaxRecvMsgSize); cfg.grpc.Listen != "" && (m > in.MaxBytes() || m > in.MaxConnBytes() || m > in.MaxInflateBytes()) {
		return fmt.Errorf("-grpc.max-recv-msg-size %d exceeds -intake.max-bytes %d, -intake.max-conn-bytes %d or -intake.inflate-bytes %d: no call could be received",
			m, in.MaxBytes(), in.MaxConnBytes(), in.MaxInflateBytes())
	}
	if m := 2 * int64(cfg.http.MaxRequestBytes); cfg.http.Listen != "" && m > in.MaxBytes() {
		return fmt.Errorf("twice -http.max-request-bytes (%d: a body and its decompressed copy) exceeds -intake.max-bytes %d", m, in.MaxBytes())
	}
	if m := int64(cfg.kafka.MaxRequestBytes + pool.Cap(cfg.kafka.TelemetryMaxBytes)); cfg.kafka.Listen != "" && m > in.MaxBytesFor(fastpath.IntakeKafka) {
		return fmt.Errorf("-kafka.max-request-bytes plus a decompression buffer of -kafka.telemetry-max-bytes (%d) exceeds -intake.unauthenticated.max-bytes %d", m, in.MaxBytesFor(fastpath.IntakeKafka))
	}
	return errors.Join(cfg.grpc.Validate(), cfg.http.Validate(), cfg.pipeline.Validate(), cfg.file.Validate(), cfg.admin.Validate(), cfg.pprof.Validate(),
		cfg.kafka.Validate(), cfg.uds.Validate())
}

// finishSpoolConfig reads the -spool.* flags; nothing is checked when the spool is off.
func finishSpoolConfig(cfg *config) error {
	if cfg.spool.Dir == "" {
		return nil
	}
	var err error
	if cfg.spool.Sync, err = spool.ParseSyncMode(cfg.spoolSync); err != nil {
		return err
	}
	if cfg.spool.Full, err = spool.ParseFullPolicy(cfg.spoolFull); err != nil {
		return err
	}
	if cfg.pipeline.Ack == fastpath.AckUpstream {
		return errors.New("-ack=upstream cannot be combined with -spool.dir: with a spool, requests are acknowledged once spooled")
	}
	return cfg.spool.Validate()
}

// finishProcessConfig reads the flags of the processing steps and builds their chain into the
// pipeline's configuration; getenv resolves ${env:NAME} in -resource.set values.
func finishProcessConfig(cfg *config, getenv func(string) (string, bool)) error {
	cfg.proc = process.DefaultConfig()
	for _, s := range cfg.procSet {
		a, err := process.ParseSet(s, getenv)
		if err != nil {
			return err
		}
		cfg.proc.Set = append(cfg.proc.Set, a)
	}
	cfg.proc.Delete = append(cfg.proc.Delete, cfg.procDelete...)
	for _, s := range cfg.procDrop {
		m, err := process.ParseDrop(s)
		if err != nil {
			return err
		}
		cfg.proc.Drop = append(cfg.proc.Drop, m)
	}
	if cfg.sampleMode != "hash_seed" {
		return fmt.Errorf("-sample.mode %q: only hash_seed is implemented (the Collector's proportional and equalizing modes are not)", cfg.sampleMode)
	}
	if cfg.sampleTraces != "" {
		pct, err := process.ParsePercent(cfg.sampleTraces)
		if err != nil {
			return err
		}
		cfg.proc.Sample = process.SampleConfig{On: true, Percent: pct, HashSeed: cfg.sampleSeed}
	} else if cfg.sampleSeedSet {
		return errors.New("-sample.hash-seed needs -sample.traces")
	}
	c, err := process.New(cfg.proc)
	if err != nil {
		return err
	}
	cfg.pipeline.Processor = nil
	if c != nil { // a nil *Chain in the interface would not read as "no processor"
		cfg.pipeline.Processor = c
	}
	return nil
}

// specHasKey reports whether a -dest spec sets key (dots and dashes alike, as ParseDest reads them).
func specHasKey(spec, key string) bool {
	for _, item := range strings.Split(spec, ",") {
		k, _, _ := strings.Cut(item, "=")
		if strings.ReplaceAll(strings.TrimSpace(k), ".", "-") == key {
			return true
		}
	}
	return false
}

// splitList splits a comma-separated flag value, dropping empty elements.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// serve runs otlpgate until ctx ends, then shuts it down in phases (see shutdown).
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	// GOMAXPROCS is left to the runtime, which follows the cgroup CPU limit and keeps it current.
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	if lim := descriptorLimit(); lim > 0 {
		if w := descriptorWarning(&cfg, lim); w != "" {
			log.Warn(w)
		}
	}
	log.Info("otlpgate starting", "gomaxprocs", runtime.GOMAXPROCS(0), "go", runtime.Version(),
		"ack", cfg.pipeline.Ack.String(), "queue_max_bytes", cfg.pipeline.QueueMaxBytes)
	// One intake limiter bounds what every intake holds before admission, as the queue does
	// after; gRPC messages inflate into its inflate budget, so it exists before the
	// compressors are registered (before any server or client).
	lim := fastpath.NewLimiter(cfg.intake)
	cc := codec.DefaultConfig()
	cc.Budget, cc.InflateClaim = grpcserver.InflateBudget(lim), cfg.grpc.MaxRecvMsgSize
	if err := codec.RegisterCompressorsWith(cc); err != nil {
		return err
	}

	var dests []fastpath.Destination
	var clients []outlet
	var fleets []*client.Fleet // re-resolved on SIGHUP
	var file *filedest.Dest
	for _, c := range cfg.clients {
		if c.Resolver != "" {
			f, err := client.NewFleet(c, log)
			if err != nil {
				return err
			}
			f.Start()
			clients, fleets, dests = append(clients, f), append(fleets, f), append(dests, f)
			log.Info("destination", "name", c.Name, "resolver", c.Resolver, "balance", c.Balance, "backends", f.Backends())
			continue
		}
		d, err := client.New(c, log)
		if err != nil {
			return err
		}
		d.Start()
		clients = append(clients, d)
		dests = append(dests, d)
		log.Info("destination", "name", c.Name, "endpoint", c.Endpoint, "protocol", c.Protocol, "mode", c.Mode)
	}
	if len(dests) == 0 {
		var err error
		if file, err = filedest.New(cfg.file, log); err != nil {
			return err
		}
		dests = append(dests, file)
		log.Info("destination", "name", "file", "path", cfg.file.Path)
	}

	if err := buildTenants(&cfg); err != nil {
		return err
	}
	var p *fastpath.Pipeline
	var sp *spooled
	if cfg.spool.Dir != "" {
		var err error
		if sp, err = openSpool(cfg, dests, log); err != nil {
			return err
		}
		if p, err = fastpath.NewLogged(cfg.pipeline, feed.Log{Spool: sp.s}); err != nil {
			sp.close(log)
			return err
		}
		sp.start()
	} else {
		var err error
		if p, err = fastpath.New(cfg.pipeline, dests); err != nil {
			return err
		}
	}
	cfg.grpc.Limiter, cfg.http.Limiter, cfg.kafka.Limiter, cfg.uds.Limiter = lim, lim, lim, lim
	gs, err := grpcserver.New(cfg.grpc, p, log)
	if err != nil {
		return err
	}
	hs, err := httpserver.New(cfg.http, p, log)
	if err != nil {
		return err
	}
	for name, addr := range map[string]string{"grpc": cfg.grpc.Listen, "http": cfg.http.Listen, "kafka": cfg.kafka.Listen, "uds": cfg.uds.Listen} {
		if addr != "" {
			cfg.admin.Status.Intakes = append(cfg.admin.Status.Intakes, name)
		}
	}
	adm, err := admin.New(cfg.admin, log, func() error {
		if gs.Addr() == nil && cfg.grpc.Listen != "" {
			return errors.New("grpc intake not listening")
		}
		if hs.Addr() == nil && cfg.http.Listen != "" {
			return errors.New("http intake not listening")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := adm.Start(); err != nil {
		return err
	}
	// Profiles only when asked for, on loopback; the listener lives until the process ends, so
	// that a shutdown can be profiled too.
	prof, err := admin.NewPprof(cfg.pprof, log)
	if err != nil {
		return err
	}
	if err := prof.Start(); err != nil {
		adm.Shutdown(context.Background())
		return err
	}
	defer prof.Shutdown(context.Background())
	ks, err := kafka.New(cfg.kafka, p, log)
	if err != nil {
		return err
	}
	if err := gs.Start(); err != nil {
		adm.Shutdown(context.Background())
		return err
	}
	if err := hs.Start(); err != nil {
		gs.Shutdown(context.Background())
		adm.Shutdown(context.Background())
		return err
	}
	if err := ks.Start(ctx); err != nil {
		hs.Shutdown(context.Background())
		gs.Shutdown(context.Background())
		adm.Shutdown(context.Background())
		return err
	}
	us, err := uds.New(cfg.uds, p, log)
	if err == nil {
		// gnet creates the socket file with the process umask, and its mode and group are set
		// just after: a tight umask closes the window in which another user could connect.
		old := syscall.Umask(0o177)
		err = us.Start(ctx)
		syscall.Umask(old)
	}
	if err != nil {
		ks.Shutdown(context.Background())
		hs.Shutdown(context.Background())
		gs.Shutdown(context.Background())
		adm.Shutdown(context.Background())
		return err
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var spoolFailed <-chan struct{} // nil without a spool: never ready
	if sp != nil {
		spoolFailed = sp.s.Failed()
	}
	var failure error
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			waiting = false
		case <-spoolFailed:
			// Acknowledged records may be gone and the spool takes no more: stop, and say so
			// in the exit status (exitLost).
			failure = sp.s.Err()
			log.Error("spool failed: acknowledged data may be lost; shutting down", "dir", cfg.spool.Dir, "err", failure)
			waiting = false
		case <-hup:
			for _, f := range fleets {
				if err := f.Reload(); err != nil {
					log.Error("cannot resolve the backends; keeping the current set", "destination", f.Name(), "err", err)
				}
			}
			if err := ks.Reload(); err != nil {
				log.Error("cannot reload the Kafka subscriptions; keeping the old ones", "err", err)
			} else {
				log.Info("reloaded the Kafka subscriptions")
			}
		}
	}
	err = shutdown(cfg.shutdown, log, adm, p, []intake{gs, hs, ks, us}, clients, file, sp)
	if failure != nil {
		lost := &lossError{errs: []error{failure}}
		if errors.As(err, &lost) {
			lost.errs = append(lost.errs, failure)
		}
		return lost
	}
	return err
}

// intake is a server that takes data in; Shutdown stops it accepting and hands what it took
// to the pipeline.
type intake interface {
	Shutdown(ctx context.Context) error
}

// outlet is a destination that drains on Shutdown: a client.Dest or a client.Fleet.
type outlet interface {
	Shutdown(ctx context.Context) error
}

// shutdown stops otlpgate in phases, each with its own share of the deadline:
//
//  1. /readyz fails at once, so that load balancers stop routing here.
//  2. Every intake stops accepting, in parallel, within half the deadline: idle streams end at
//     once, streams answer what they accepted (with -ack=upstream, once delivered), unary calls
//     finish, and the UDS exporter's final flush and Kafka's last pushes are admitted. Open
//     batches are sealed meanwhile, so that what waits for its upstream answer is sent.
//  3. Open batches are sealed for the last time and admission ends (pipeline Close).
//  4. The destinations drain in parallel, until the deadline.
//
// It returns a lossError when something acknowledged was not delivered; each loss is logged
// here, once.
func shutdown(timeout time.Duration, log *slog.Logger, adm *admin.Server, p *fastpath.Pipeline,
	intakes []intake, clients []outlet, file *filedest.Dest, sp *spooled) error {
	log.Info("shutting down", "timeout", timeout)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	adm.Drain()

	ictx, icancel := context.WithTimeout(ctx, timeout/2)
	defer icancel()
	intakesDone := make(chan struct{})
	go sealWhileDraining(p, intakesDone)
	ierrs := make(chan error, len(intakes))
	for _, in := range intakes {
		go func() { ierrs <- in.Shutdown(ictx) }()
	}
	for range intakes {
		if err := <-ierrs; err != nil {
			// Not a loss: what an intake did not finish was not acknowledged, and the client
			// (or the PHP process, or the Kafka client) sends it again or counted it.
			log.Warn("intake did not stop cleanly", "err", err)
		}
	}
	close(intakesDone)
	log.Debug("intakes stopped", "took", time.Since(began))

	p.Close()
	if sp != nil {
		// Nothing more is read from the spool; what the destinations hold is finished as usual.
		sp.stopFeeding()
	}

	// Destinations drain in parallel: one slow upstream must not eat the others' time.
	errc := make(chan error, len(clients)+1)
	for _, d := range clients {
		go func() { errc <- d.Shutdown(ctx) }()
	}
	n := len(clients)
	if file != nil {
		n++
		go func() { errc <- file.Shutdown(ctx) }()
	}
	var lost lossError
	for range n {
		if err := <-errc; err != nil {
			if sp != nil {
				// Not a loss: what a destination gave up at shutdown is still in the spool and is
				// delivered after the next start.
				log.Info("undelivered batches stay in the spool for the next start", "err", err)
				continue
			}
			log.Error("data lost at shutdown", "err", err)
			lost.errs = append(lost.errs, err)
		}
	}
	if sp != nil {
		if err := sp.close(log); err != nil {
			log.Error("spool not closed cleanly: the next start replays more than needed", "err", err)
		}
	}
	if q := p.QueuedBytes(); q > 0 && len(lost.errs) == 0 {
		// Every destination finishes every batch it took, lost or not; bytes left over were
		// never accounted for by one.
		log.Error("data lost at shutdown", "err", fmt.Sprintf("%d admitted bytes were not finished by every destination", q))
		lost.errs = append(lost.errs, fmt.Errorf("%d bytes unaccounted for", q))
	}
	adm.Shutdown(ctx)
	log.Info("stopped", "took", time.Since(began).Round(time.Millisecond), "lost", len(lost.errs) > 0)
	if len(lost.errs) > 0 {
		return &lost
	}
	return nil
}

// sealEvery is how often open batches are sealed while the intakes stop: requests that wait for
// their upstream answer (-ack=upstream) must not wait for -batch.max-age as well.
const sealEvery = 5 * time.Millisecond

// sealWhileDraining seals the open batches every sealEvery until done is closed.
func sealWhileDraining(p *fastpath.Pipeline, done <-chan struct{}) {
	t := time.NewTicker(sealEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			p.Flush()
		}
	}
}

// lossError reports that data acknowledged to clients was lost at shutdown; every loss was
// logged already. The process exits with exitLost.
type lossError struct{ errs []error }

func (e *lossError) Error() string { return errors.Join(e.errs...).Error() }

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // could not start, or stopped on an error
	exitUsage  = 2 // bad flags or configuration
	exitLost   = 3 // shut down, but acknowledged data was lost (logged and counted)
)
