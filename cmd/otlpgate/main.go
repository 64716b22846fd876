package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/credfile"
	gw "github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/rawio"
	"github.com/otlpgate/otlpgate/server/admin"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
	httpserver "github.com/otlpgate/otlpgate/server/http"
	"github.com/otlpgate/otlpgate/server/kafka"
	"github.com/otlpgate/otlpgate/server/kafkaconsume"
	"github.com/otlpgate/otlpgate/server/uds"
	"github.com/otlpgate/otlpgate/spool"
)

// config is everything the flags set.
type config struct {
	grpc      grpcserver.Config
	http      httpserver.Config
	authToken string // -auth.token-file: both intakes unless one has its own
	corsOrig  string
	corsHdrs  string
	pipeline  pipeline.Config
	intake    admission.LimiterConfig
	file      filedest.Config
	admin     admin.Config
	pprof     admin.PprofConfig
	kafka     kafka.Config
	uds       uds.Config
	udsMode   string
	kafkaMets string
	// The Kafka consumer intake: -kafka.consume.* (kafkaconsume.Config), and the flags read
	// into it by finishConsumeConfig.
	consume                 kafkaconsume.Config
	consumeBrokers          string
	consumeTopics           string
	consumeEncoding         string
	consumeTLS              client.TLS
	consumeTLSOn            bool
	consumeSASLPasswordFile string
	dests                   []string
	ack                     string
	// minGapGiven is whether -batch.min-gap was given: its default depends on -ack.
	minGapGiven bool
	scanDepth   string
	logLevel    string
	logFormat   string
	shutdown    time.Duration
	spool       spool.Config // Dir empty: no spool
	spoolSync   string
	spoolFull   string
	// spoolGroupReadable: -spool.group-readable, for spool.OSFS.
	spoolGroupReadable bool
	// The processing steps (process/): -resource.set, -resource.delete, -resource.from-peer,
	// -drop, -sample.*.
	procSet, procDelete, procDrop []string
	peerAction                    string // -resource.from-peer.action
	sampleTraces, sampleMode      string
	sampleSeed                    uint32
	sampleSeedSet                 bool
	samplePrecision               string
	samplePrecisionSet            bool
	sampleLogs                    bool
	proc                          process.Config
	// Tenants: -intake.headers (a comma-separated list), -intake.headers.default,
	// -intake.max-tenants, -intake.tenant-idle, -tenant.* (tenants.go).
	tenantHeaders           string
	tenantRate, tenantBurst string // -tenant.rate, -tenant.burst
	tenants                 tenant.Config
	tenantsFile             string // -auth.tenants-file
	// gw is what finishConfig builds from the rest: the whole gateway.
	gw gw.Config

	// -dest.file, -dest.file.poll-interval and -dest.file.max-destinations.
	destFile     string
	destFilePoll time.Duration
	secretsPoll  time.Duration
	destFileMax  int

	// -version prints the build and exits; -check checks the configuration and exits.
	version, check bool

	// -config and -config.poll-interval (configfile.go, reload.go).
	configFile string
	configPoll time.Duration
	// rawIO is -net.raw-syscalls (internal/rawio).
	rawIO bool
}

func defaultConfig() config {
	return config{
		grpc:      grpcserver.DefaultConfig(),
		http:      httpserver.DefaultConfig(),
		pipeline:  pipeline.DefaultConfig(),
		intake:    admission.DefaultLimiterConfig(),
		file:      filedest.DefaultConfig(),
		admin:     admin.DefaultConfig(),
		pprof:     admin.DefaultPprofConfig(),
		kafka:     kafka.DefaultConfig(),
		uds:       uds.DefaultConfig(),
		udsMode:   "0660",
		kafkaMets: "*",
		consume:   kafkaconsume.DefaultConfig(),

		consumeEncoding: kafkaconsume.EncodingProto,
		ack:             "accept",
		scanDepth:       "full",
		logLevel:        "info",
		logFormat:       "text",
		rawIO:           true,
		shutdown:        30 * time.Second,
		spool:           spool.DefaultConfig(),
		spoolSync:       spool.DefaultConfig().Sync.String(),
		spoolFull:       spool.DefaultConfig().Full.String(),
		sampleMode:      "hash_seed",
		tenants:         tenant.DefaultConfig(),

		destFilePoll: gw.DefaultConfig().DestFilePoll,
		secretsPoll:  gw.DefaultConfig().SecretsPoll,
		destFileMax:  gw.DefaultConfig().DestFileMax,
		configPoll:   gw.DefaultConfig().DestFilePoll,
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr *os.File) int {
	pc, err := loadConfig(args, os.LookupEnv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFlags):
		return exitUsage // the flag package said why
	case err != nil:
		fmt.Fprintln(stderr, "otlpgate:", err)
		return exitUsage
	}
	cfg, fs := pc.cfg, pc.fs
	// otlpgate has no subcommands: "otlpgate version" or "otlpgate validate" must not start a
	// server the user did not ask for, and a flag after a stray word would be ignored.
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "otlpgate: unexpected argument %q: otlpgate takes flags only\n\n%s\notlpgate -help lists the flags.\n", fs.Arg(0), usageHeader)
		return exitUsage
	}
	b := buildInfo()
	if cfg.version {
		fmt.Fprintln(stdout, b)
		return exitOK
	}
	log, err := newLogger(cfg.logLevel, cfg.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "otlpgate:", err)
		return exitUsage
	}
	if err := finishConfig(&cfg); err != nil {
		if cfg.check {
			fmt.Fprintln(stderr, "otlpgate: bad configuration:", err)
			return exitUsage
		}
		log.Error("bad configuration", "err", err)
		return exitUsage
	}
	if cfg.check {
		summary, err := cfg.gw.Check()
		if err != nil {
			fmt.Fprintln(stderr, "otlpgate: bad configuration:", err)
			return exitUsage
		}
		fmt.Fprintln(stdout, "otlpgate:", summary)
		return exitOK
	}
	log.Info("otlpgate build", "version", b.version, "commit", b.commit, "go", b.goVersion)
	rawio.SetEnabled(cfg.rawIO)
	b.export()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	src := configSource{args: args, getenv: os.LookupEnv, path: cfg.configFile, file: pc.file, body: pc.body}
	if err := serve(ctx, cfg, src, log); err != nil {
		var lost *gw.LossError
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

// finishConfig turns the string-valued flags into typed settings, builds the gateway's
// configuration from them (cfg.gw) and validates it.
func finishConfig(cfg *config) error {
	var err error
	if cfg.pipeline.Ack, err = pipeline.ParseAckMode(cfg.ack); err != nil {
		return err
	}
	if cfg.pipeline.Ack == pipeline.AckUpstream && !cfg.minGapGiven {
		cfg.pipeline.BatchMinGap = pipeline.UpstreamMinGap
	}
	if cfg.grpc.ScanDepth, err = pipeline.ParseDepth(cfg.scanDepth); err != nil {
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
	if err := finishSpoolConfig(cfg); err != nil {
		return err
	}
	if err := finishProcessConfig(cfg); err != nil {
		return err
	}
	if err := finishTenantConfig(cfg); err != nil {
		return err
	}
	if err := finishConsumeConfig(cfg); err != nil {
		return err
	}
	cfg.gw = gw.Config{
		GRPC: cfg.grpc, HTTP: cfg.http, Kafka: cfg.kafka, UDS: cfg.uds, Admin: cfg.admin, Pprof: cfg.pprof,
		Intake: cfg.intake, Pipeline: cfg.pipeline, Dests: cfg.dests, DestFile: cfg.destFile, DestFilePoll: cfg.destFilePoll, SecretsPoll: cfg.secretsPoll, DestFileMax: cfg.destFileMax, File: cfg.file,
		Spool: cfg.spool, SpoolGroupReadable: cfg.spoolGroupReadable, ShutdownTimeout: cfg.shutdown,
		Tenants: cfg.tenants, TenantsFile: cfg.tenantsFile, KafkaConsume: cfg.consume,
	}
	return cfg.gw.Validate()
}

// finishConsumeConfig reads the -kafka.consume.* flags that are not set directly: brokers,
// topics, TLS and the SASL password file. Nothing is checked when the consumer is off.
func finishConsumeConfig(cfg *config) error {
	c := &cfg.consume
	c.Brokers = splitList(cfg.consumeBrokers)
	c.ScanDepth = cfg.grpc.ScanDepth
	var err error
	if c.Topics, err = kafkaconsume.ParseTopics(cfg.consumeTopics, cfg.consumeEncoding); err != nil {
		return err
	}
	if !c.On() {
		return nil
	}
	t := cfg.consumeTLS
	if cfg.consumeTLSOn || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify {
		if (t.CertFile == "") != (t.KeyFile == "") {
			return errors.New("-kafka.consume.tls.cert and -kafka.consume.tls.key go together")
		}
		if c.TLS, err = t.ClientConfig(); err != nil {
			return fmt.Errorf("-kafka.consume.tls.*: %w", err)
		}
	}
	if cfg.consumeSASLPasswordFile != "" {
		if c.SASLPassword, err = credfile.Value(cfg.consumeSASLPasswordFile); err != nil {
			return fmt.Errorf("-kafka.consume.sasl.password-file: %w", err)
		}
	}
	return nil
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
	cfg.spool.Full, err = spool.ParseFullPolicy(cfg.spoolFull)
	return err
}

// finishProcessConfig reads the flags of the processing steps and builds their chain into the
// pipeline's configuration.
func finishProcessConfig(cfg *config) error {
	fromPeer := cfg.proc.FromPeer // set by its flag
	cfg.proc = process.DefaultConfig()
	cfg.proc.FromPeer = fromPeer
	action, err := process.ParsePeerAction(cfg.peerAction)
	if err != nil {
		return err
	}
	cfg.proc.FromPeerAction = action
	for _, s := range cfg.procSet {
		a, err := process.ParseSet(s)
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
	mode, err := process.ParseSampleMode(cfg.sampleMode)
	if err != nil {
		return err
	}
	switch {
	case cfg.sampleTraces == "" && (cfg.sampleSeedSet || cfg.samplePrecisionSet || cfg.sampleLogs):
		return errors.New("-sample.hash-seed, -sample.precision and -sample.logs need -sample.traces")
	case cfg.sampleTraces == "":
	case mode == process.SampleHashSeed && cfg.samplePrecisionSet:
		return errors.New("-sample.precision applies to -sample.mode=proportional and equalizing, which write thresholds; hash_seed writes none")
	case mode != process.SampleHashSeed && cfg.sampleSeedSet:
		return fmt.Errorf("-sample.hash-seed applies to -sample.mode=hash_seed; %v decides by the trace id's randomness, without a seed", mode)
	default:
		pct, err := process.ParsePercent(cfg.sampleTraces)
		if err != nil {
			return err
		}
		precision := 0
		if cfg.samplePrecisionSet {
			if precision, err = process.ParsePrecision(cfg.samplePrecision); err != nil {
				return err
			}
		}
		cfg.proc.Sample = process.SampleConfig{On: true, Percent: pct, Mode: mode, HashSeed: cfg.sampleSeed,
			Precision: precision, Logs: cfg.sampleLogs}
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

// serve runs otlpgate until ctx ends or it fails, reloading on SIGHUP and on a change of the
// config file (src), then shuts it down in phases (gw.Gateway.Shutdown).
func serve(ctx context.Context, cfg config, src configSource, log *slog.Logger) error {
	if lim := descriptorLimit(); lim > 0 {
		if w := descriptorWarning(&cfg, lim); w != "" {
			log.Warn(w)
		}
	}
	g, err := gw.New(cfg.gw, log)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := g.Start(ctx); err != nil {
		return err
	}
	// A change of the config file is applied here, on this goroutine, as SIGHUP is: reloads
	// never overlap.
	changed := make(chan struct{}, 1)
	if src.path != "" && cfg.configPoll > 0 {
		g.Watch(src.path, cfg.configPoll, src.body, func() {
			select {
			case changed <- struct{}{}:
			default: // one is pending: it reads the file as it is then
			}
		})
	}
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			waiting = false
		case <-g.Failed():
			waiting = false // logged by the gateway; Shutdown returns the loss
		case <-hup:
			if src.path != "" {
				src.reload(g, log, "reload")
			} else {
				g.Reload() // each failure is logged, and keeps what ran before
			}
		case <-changed:
			src.reload(g, log, "changed")
		}
	}
	return g.Shutdown(context.Background())
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // could not start, or stopped on an error
	exitUsage  = 2 // bad flags or configuration
	exitLost   = 3 // shut down, but acknowledged data was lost (logged and counted)
)
