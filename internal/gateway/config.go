package gateway

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/bytesize"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/otlpgate/otlpgate/server/admin"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
	httpserver "github.com/otlpgate/otlpgate/server/http"
	"github.com/otlpgate/otlpgate/server/kafka"
	"github.com/otlpgate/otlpgate/server/kafkaconsume"
	"github.com/otlpgate/otlpgate/server/uds"
	"github.com/otlpgate/otlpgate/spool"
)

// Config is a whole otlpgate. The flag that sets each part is named in parentheses; the
// parts' own Config types document their fields.
type Config struct {
	GRPC  grpcserver.Config // -grpc.*; an empty Listen turns the intake off
	HTTP  httpserver.Config // -http.*
	Kafka kafka.Config      // -kafka.*
	UDS   uds.Config        // -uds.*
	Admin admin.Config      // -admin.listen, -status.*
	Pprof admin.PprofConfig // -pprof.*
	// KafkaConsume is the Kafka consumer intake (-kafka.consume.*); no Brokers turns it off.
	// The gateway sets its Tenants.
	KafkaConsume kafkaconsume.Config
	// Intake bounds what every intake holds before admission (-intake.*). The gateway builds
	// one limiter from it and gives it to each intake: their own Limiter fields are ignored.
	Intake admission.LimiterConfig
	// Pipeline is admission and batching (-queue.max-bytes, -batch.*, -ack); its Processor holds
	// the processing steps.
	Pipeline pipeline.Config
	// Dests are the -dest values, read with the defaults otlpgate derives from the rest of the
	// configuration (AllDestinations).
	Dests []string
	// Destinations are upstreams configured in code, used as given. With neither Dests,
	// Destinations, Extra nor DestFile, batches go to the local file (File).
	Destinations []client.Config
	// DestFile holds more -dest values, one a line (-dest.file, destfile.go). Reload, and a
	// change seen by reading it every DestFilePoll, apply the difference while otlpgate runs.
	DestFile string
	// DestFilePoll is how often DestFile is read for a change (-dest.file.poll-interval,
	// default 5s; 0: only on Reload).
	DestFilePoll time.Duration
	// SecretsPoll is how often the files whose content a reload reads again are read for a
	// change (-secrets.poll-interval, default 10s; 0: only on Reload): a destination's
	// header-file and bearer-token-file, the ${file:PATH} references of DestFile's lines and
	// TenantsFile. A change reloads as Reload does (secretwatch.go).
	SecretsPoll time.Duration
	// DestFileMax bounds the destinations DestFile may hold (-dest.file.max-destinations,
	// default 1000): each costs goroutines, memory and series even when idle
	// (docs/destinations.md gives the figures), so a file with more stops otlpgate at start and
	// is refused at a reload, with an error that names the flag.
	DestFileMax int
	// Extra are destinations the caller built and owns, handed batches like the others (the
	// in-process recorders of tests and benchmarks): the gateway neither starts nor shuts
	// them down, and with a spool each gets a feeder under its name.
	Extra []pipeline.Destination
	// File is the local OTLP/JSON file written when there is no other destination (-file.*).
	File filedest.Config
	// Spool is the durable spool behind acknowledgement (-spool.*); an empty Dir turns it off.
	Spool spool.Config
	// SpoolFS is the spool's file system: nil is spool.OSFS with SpoolGroupReadable. Tests put
	// a failing one here.
	SpoolFS spool.FS
	// SpoolGroupReadable creates the spool's files for the group to read (-spool.group-readable).
	SpoolGroupReadable bool
	// ShutdownTimeout bounds the whole shutdown (-shutdown.timeout, default 30s).
	ShutdownTimeout time.Duration
	// Tenants are the tenant headers and their bounds (-intake.headers, -intake.max-tenants,
	// -intake.tenant-idle, -tenant.*); no Headers: tenants off. Its Routes are ignored: the
	// gateway takes them from the destinations' match-header (tenants.go).
	Tenants tenant.Config
	// TenantsFile binds bearer tokens to tenants (-auth.tenants-file, tenants.go): a request's
	// tenant is then its token's, never what its headers claim. Read at start and on Reload.
	TenantsFile string
}

// DefaultConfig returns otlpgate's defaults: every part's own defaults (gRPC, OTLP/HTTP and
// the admin listener on loopback, the UDS socket in /tmp, Kafka off), no destination (so the
// local file), no spool.
func DefaultConfig() Config {
	return Config{
		GRPC:            grpcserver.DefaultConfig(),
		HTTP:            httpserver.DefaultConfig(),
		Kafka:           kafka.DefaultConfig(),
		KafkaConsume:    kafkaconsume.DefaultConfig(),
		UDS:             uds.DefaultConfig(),
		Admin:           admin.DefaultConfig(),
		Pprof:           admin.DefaultPprofConfig(),
		Intake:          admission.DefaultLimiterConfig(),
		Pipeline:        pipeline.DefaultConfig(),
		File:            filedest.DefaultConfig(),
		Spool:           spool.DefaultConfig(),
		DestFilePoll:    5 * time.Second,
		SecretsPoll:     10 * time.Second,
		DestFileMax:     1000,
		ShutdownTimeout: 30 * time.Second,
		Tenants:         tenant.DefaultConfig(),
	}
}

// Validate reports a configuration that cannot work, naming the flags involved.
func (c Config) Validate() error {
	if c.ShutdownTimeout <= 0 {
		return errors.New("-shutdown.timeout must be positive")
	}
	dests, err := c.AllDestinations()
	if err != nil {
		return err
	}
	if c.DestFilePoll < 0 {
		return errors.New("-dest.file.poll-interval must not be negative")
	}
	if c.SecretsPoll < 0 {
		return errors.New("-secrets.poll-interval must not be negative")
	}
	if c.DestFile != "" && c.DestFileMax < 1 {
		return errors.New("-dest.file.max-destinations must be at least 1")
	}
	if err := c.checkTenants(dests); err != nil {
		return err
	}
	if _, err := c.resourceRoutes(dests); err != nil {
		return err
	}
	if c.Spool.Dir != "" {
		if c.Pipeline.Ack == pipeline.AckUpstream {
			return errors.New("-ack=upstream cannot be combined with -spool.dir: with a spool, requests are acknowledged once spooled")
		}
		if sp := c.Spool; sp.MaxBytes < 2*sp.SegmentBytes {
			// The spool writes one segment while the oldest waits for the destinations. Said
			// in the flags' units, with both ways out: the defaults (1GiB, 64MiB) meet it, so
			// whoever sees this set one of the two.
			return fmt.Errorf("-spool.max-bytes %s is below two segments of -spool.segment-bytes %s: raise -spool.max-bytes to %s or more, or lower -spool.segment-bytes to %s or less",
				bytesize.Format(sp.MaxBytes), bytesize.Format(sp.SegmentBytes), bytesize.Format(2*sp.SegmentBytes), bytesize.Format(sp.MaxBytes/2))
		}
		if err := c.Spool.Validate(); err != nil {
			return err
		}
	}
	if err := c.Intake.Validate(); err != nil {
		return err
	}
	// The servers check their sizes against the limiter again; these name the flags.
	in := admission.NewLimiter(c.Intake)
	if m := int64(c.GRPC.MaxRecvMsgSize); c.GRPC.Listen != "" && (m > in.MaxBytes() || m > in.MaxConnBytes() || m > in.MaxInflateBytes()) {
		return fmt.Errorf("-grpc.max-recv-msg-size %d exceeds -intake.max-bytes %d, -intake.max-conn-bytes %d or -intake.inflate-bytes %d: no call could be received",
			m, in.MaxBytes(), in.MaxConnBytes(), in.MaxInflateBytes())
	}
	if m := 2 * int64(c.HTTP.MaxRequestBytes); c.HTTP.Listen != "" && m > in.MaxBytes() {
		return fmt.Errorf("twice -http.max-request-bytes (%d: a body and its decompressed copy) exceeds -intake.max-bytes %d", m, in.MaxBytes())
	}
	if m := int64(c.Kafka.MaxRequestBytes + pool.Cap(c.Kafka.TelemetryMaxBytes)); c.Kafka.Listen != "" && m > in.MaxBytesFor(admission.IntakeKafka) {
		return fmt.Errorf("-kafka.max-request-bytes plus a decompression buffer of -kafka.telemetry-max-bytes (%d) exceeds -intake.unauthenticated.max-bytes %d", m, in.MaxBytesFor(admission.IntakeKafka))
	}
	return errors.Join(c.GRPC.Validate(), c.HTTP.Validate(), c.Pipeline.Validate(), c.File.Validate(), c.Admin.Validate(), c.Pprof.Validate(),
		c.Kafka.Validate(), c.UDS.Validate(), c.KafkaConsume.Validate())
}

// Warnings lists configurations that work but may surprise; New logs them.
func (c Config) Warnings() []string {
	var out []string
	dests, _ := c.AllDestinations()
	if len(dests) == 1 && len(c.Extra) == 0 && dests[0].QueueBytes < c.Pipeline.QueueMaxBytes {
		out = append(out, fmt.Sprintf("-dest %s: queue-bytes below -queue.max-bytes: under overload, batches already acknowledged to clients can be refused at hand-over (counted in otlpgate_fastpath_destination_refused_batches_total)", dests[0].Name))
	}
	return out
}

// AllDestinations returns the upstreams New builds, DestFile's aside: the Dests read with
// otlpgate's defaults (parseDests), then the Destinations as given.
func (c Config) AllDestinations() ([]client.Config, error) { return c.destinations(nil) }

// destinations returns the Dests and the -dest.file values fileSpecs, read together with
// otlpgate's defaults, then the Destinations; every name, the Extra ones' included, must be
// unique.
func (c Config) destinations(fileSpecs []string) ([]client.Config, error) {
	if len(fileSpecs) > c.DestFileMax {
		return nil, fmt.Errorf("-dest.file holds %d destinations, more than -dest.file.max-destinations %d", len(fileSpecs), c.DestFileMax)
	}
	dests, err := c.parseDests(append(slices.Clone(c.Dests), fileSpecs...))
	if err != nil {
		return nil, err
	}
	dests = append(dests, c.Destinations...)
	names := map[string]bool{}
	for _, d := range dests {
		if names[d.Name] {
			return nil, fmt.Errorf("-dest: two destinations are named %q", d.Name)
		}
		names[d.Name] = true
	}
	for _, d := range c.Extra {
		if names[d.Name()] {
			return nil, fmt.Errorf("-dest: two destinations are named %q", d.Name())
		}
		names[d.Name()] = true
	}
	// The spool knows a destination by its spool-id (its name by default): two that shared
	// one would share a cursor and each take the other's records as its own.
	ids := map[string]string{}
	for _, d := range dests {
		if other, ok := ids[spoolKey(d)]; ok {
			return nil, fmt.Errorf("-dest: destinations %q and %q have the same spool-id %q", other, d.Name, spoolKey(d))
		}
		ids[spoolKey(d)] = d.Name
	}
	for _, d := range c.Extra {
		if other, ok := ids[d.Name()]; ok {
			return nil, fmt.Errorf("-dest: destinations %q and %q have the same spool-id %q", other, d.Name(), d.Name())
		}
	}
	return dests, nil
}

// parseDests reads -dest values into destination configurations, with the defaults otlpgate
// derives from the rest of c: unless a value sets queue-bytes, a single destination may hold
// what the pipeline admits (-queue.max-bytes) and several get half of it each; with a spool
// they retry without a time budget. Several destinations must each hold less than the
// pipeline admits.
func (c Config) parseDests(specs []string) ([]client.Config, error) {
	var out []client.Config
	for _, spec := range specs {
		s, err := client.ReadDest(spec)
		if err != nil {
			return nil, fmt.Errorf("-dest %q: %w", client.RedactDest(spec), err)
		}
		base := client.DefaultConfig()
		if !s.Given().Has("queue-bytes") {
			// Unless told otherwise, a destination may hold what the pipeline admits: a single
			// destination then never refuses a batch at hand-over (overload shows as backpressure
			// to clients, and nothing acknowledged is dropped); several split the budget, so that a
			// dead one cannot stall the others.
			base.QueueBytes = c.Pipeline.QueueMaxBytes
			if len(specs) > 1 {
				base.QueueBytes = c.Pipeline.QueueMaxBytes / 2
			}
		}
		if c.Spool.Dir != "" {
			if s.Given().Has("retry-max-elapsed") {
				return nil, fmt.Errorf("-dest %q: retry-max-elapsed cannot be combined with -spool.dir: spooled data is retried until the spool is full", client.RedactDest(spec))
			}
			// Data on disk is never given up because a retry budget ran out.
			base.RetryMaxElapsed = 0
		}
		d, err := s.Apply(base)
		if err != nil {
			return nil, fmt.Errorf("-dest %q: %w", client.RedactDest(spec), err)
		}
		out = append(out, d)
	}
	if len(out) > 1 {
		// Every batch counts against -queue.max-bytes until each destination is done with it: a
		// dead destination allowed to hold as much would stall the others.
		for _, d := range out {
			if d.QueueBytes >= c.Pipeline.QueueMaxBytes {
				return nil, fmt.Errorf("-dest %s: queue-bytes %d must be below -queue.max-bytes %d when there are several destinations, or a dead one could stall the rest",
					d.Name, d.QueueBytes, c.Pipeline.QueueMaxBytes)
			}
		}
	}
	return out, nil
}

// spoolKey is what the spool knows destination d by: its spool-id, or its name.
func spoolKey(d client.Config) string {
	if d.SpoolID != "" {
		return d.SpoolID
	}
	return d.Name
}

// CheckDest reads one -dest value as New reads the Dests, in a configuration of its own with
// otlpgate's defaults, so that a config file can report a bad destination with its line
// before the whole configuration is read. New and Validate still check it with the rest.
func CheckDest(spec string) error {
	c := DefaultConfig()
	c.Dests = []string{spec}
	return c.checkRoutes()
}
