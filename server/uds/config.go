package uds

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/internal/admission"
)

// The engines that serve the socket (Config.Engine).
const (
	EngineGNet = "gnet"
	EngineNet  = "net"
)

// Config of the OpenCensus daemon intake. Flag names are those cmd/otlpgate defines.
type Config struct {
	// Listen is the path of the unix socket (-uds.listen, default /tmp/oc-daemon.sock, where
	// OpenCensus PHP's DaemonClient connects by default). Empty turns the intake off.
	Listen string
	// Mode is the permission of the socket file (-uds.mode, default 0660). PHP processes need
	// write permission to connect.
	Mode os.FileMode
	// Group is the group the socket file is given at start, by name or numeric gid
	// (-uds.group, default "": the group the process creates files with). With mode 0660 it
	// is the group whose members (the PHP workers' user) may connect. A group that does not
	// exist, or that the process may not give files to, fails Start.
	Group string
	// Engine serves the socket (-uds.engine): EngineGNet (the default), gnet's event loops, or
	// EngineNet, a goroutine per connection on Go's network poller, which costs a fraction of
	// the event loops' CPU below a few hundred messages a second (docs/intakes/opencensus-php.md).
	Engine string
	// Loops is the number of gnet event loops (-uds.loops, default 0: one per GOMAXPROCS).
	// Connections are spread over them; each connection stays on one. EngineNet has none.
	Loops int
	// MaxMessageBytes caps the payload length a header may declare (-uds.max-message-bytes,
	// default 4MiB). Longer messages are discarded and counted in
	// otlpgate_uds_discarded_messages_total{reason="too_large"}.
	MaxMessageBytes int
	// MaxSeries caps the tag sets of one view (-uds.max-series, default 2000). Measurements for
	// further tag sets aggregate into one series marked otel.metric.overflow=true and are
	// counted in otlpgate_uds_series_overflow_total.
	MaxSeries int
	// MaxSeriesTotal caps the series of all views of all processes together
	// (-uds.max-series-total, default 200000), so that many processes each under MaxSeries cannot
	// add up to unbounded memory. Measurements for further tag sets go to their view's overflow
	// series and are counted in otlpgate_uds_series_total_overflow_total.
	MaxSeriesTotal int
	// MaxProcesses caps the PHP processes with stats state (-uds.max-processes, default 10000);
	// stats messages of further processes are counted in
	// otlpgate_uds_stats_rejected_total{reason="process_limit"}.
	MaxProcesses int
	// MaxMeasures and MaxViews cap the definitions of one process (-uds.max-measures,
	// -uds.max-views, default 1000 each); further ones are counted in
	// otlpgate_uds_stats_rejected_total{reason="definition_limit"}.
	MaxMeasures int
	MaxViews    int
	// MaxStringBytes caps every string the intake keeps between exports: measure and view names,
	// descriptions, units, tag keys, and the tag values and attachments of recorded series
	// (-uds.max-string-bytes, default 1KiB; OpenCensus itself caps tag values at 255 bytes).
	// Definitions and measurements with a longer one are refused, counted in
	// otlpgate_uds_stats_rejected_total{reason="too_long"}: with MaxMeasures, MaxViews,
	// MaxSeries and MaxProcesses it bounds the stats state in bytes, not only in entries.
	MaxStringBytes int
	// MaxConnections caps concurrent client connections (-uds.max-connections, default 10000);
	// further ones are closed at once and counted in otlpgate_uds_connections_rejected_total.
	MaxConnections int
	// ServiceName becomes the service.name resource attribute of everything the intake emits
	// (-uds.service-name, default "unknown_service:php"); empty leaves it out.
	ServiceName string
	// IdleTimeout closes a connection that sends nothing for this long (-uds.idle-timeout,
	// default 1h; 0 disables). PHP keeps its daemon connection open across requests, so a
	// quiet worker must not be cut off; the limit only reclaims connections whose process
	// vanished without closing them. Counted in otlpgate_uds_timeouts_total{kind="idle"}.
	IdleTimeout time.Duration
	// ReadTimeout bounds how long a message may take to arrive once its first byte did
	// (-uds.read-timeout, default 10s; 0 disables). A connection that leaves a message
	// unfinished for longer (a client stalled mid-write, or one trickling bytes to hold a
	// buffer) is closed and the partial message discarded, counted in
	// otlpgate_uds_timeouts_total{kind="read"} and as truncated in
	// otlpgate_uds_discarded_messages_total.
	ReadTimeout time.Duration
	// Limiter is the process-wide intake limiter (-intake.*), nil for none. A message that
	// does not arrive in one read is kept until its rest arrives only with the limiter's bytes;
	// without them (event loops never wait) it is discarded and counted in
	// otlpgate_uds_discarded_messages_total{reason="intake_limit"}.
	Limiter *admission.Limiter
	// DefaultReportingPeriod is how often a process's views are exported until the process
	// sends VIEW_REPORTING_PERIOD (-uds.reporting-period, default 10s).
	DefaultReportingPeriod time.Duration
}

// DefaultConfig returns the defaults documented on Config. Safe for concurrent use.
func DefaultConfig() Config {
	return Config{
		Listen:                 "/tmp/oc-daemon.sock",
		Mode:                   0o660,
		Engine:                 EngineGNet,
		Loops:                  0,
		MaxMessageBytes:        4 << 20,
		MaxSeries:              2000,
		MaxSeriesTotal:         200000,
		MaxProcesses:           10000,
		MaxMeasures:            1000,
		MaxViews:               1000,
		MaxStringBytes:         1024,
		MaxConnections:         10000,
		ServiceName:            "unknown_service:php",
		DefaultReportingPeriod: 10 * time.Second,
		IdleTimeout:            time.Hour,
		ReadTimeout:            10 * time.Second,
	}
}

const (
	// maxSocketPath is the longest unix socket path every supported OS accepts (sun_path is
	// 104 bytes on the BSDs, 108 on Linux, both including the terminating NUL).
	maxSocketPath = 103
	// maxListenPath is the longest -uds.listen: the socket is bound under a name two bytes
	// longer (tempSocketPath) and moved into place once it is ready.
	maxListenPath = maxSocketPath - 2
	// minReportingPeriod and maxReportingPeriod bound the export period; the client itself never
	// sends less than one second.
	minReportingPeriod = time.Second
	maxReportingPeriod = 24 * time.Hour
	// maxMessageBytesLimit keeps a single connection's reassembly buffer bounded.
	maxMessageBytesLimit = 256 << 20
)

// Validate reports a configuration that cannot work. Safe for concurrent use.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	var errs []error
	if len(c.Listen) > maxListenPath {
		errs = append(errs, fmt.Errorf("uds: socket path %q longer than %d bytes", c.Listen, maxListenPath))
	}
	if strings.ContainsAny(c.Listen, "?#\x00") {
		errs = append(errs, fmt.Errorf("uds: socket path %q contains '?', '#' or NUL", c.Listen))
	}
	if c.Mode&^os.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("uds: mode %v has bits beyond the permissions", c.Mode))
	}
	if c.Engine != EngineGNet && c.Engine != EngineNet {
		errs = append(errs, fmt.Errorf("uds: engine %q is neither %q nor %q", c.Engine, EngineGNet, EngineNet))
	}
	if c.Loops < 0 {
		errs = append(errs, errors.New("uds: loops must not be negative"))
	}
	if c.MaxMessageBytes <= 0 || c.MaxMessageBytes > maxMessageBytesLimit {
		errs = append(errs, fmt.Errorf("uds: max message bytes must be in 1..%d", maxMessageBytesLimit))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"max series", c.MaxSeries}, {"max series total", c.MaxSeriesTotal}, {"max processes", c.MaxProcesses}, {"max measures", c.MaxMeasures},
		{"max views", c.MaxViews}, {"max string bytes", c.MaxStringBytes}, {"max connections", c.MaxConnections}} {
		if v.n <= 0 {
			errs = append(errs, fmt.Errorf("uds: %s must be positive", v.name))
		}
	}
	if c.IdleTimeout < 0 || c.ReadTimeout < 0 {
		errs = append(errs, errors.New("uds: idle and read timeouts must not be negative (0 disables)"))
	}
	if strings.ContainsRune(c.Group, 0) {
		errs = append(errs, fmt.Errorf("uds: group %q contains NUL", c.Group))
	}
	if c.DefaultReportingPeriod < minReportingPeriod || c.DefaultReportingPeriod > maxReportingPeriod {
		errs = append(errs, fmt.Errorf("uds: reporting period must be in %v..%v", minReportingPeriod, maxReportingPeriod))
	}
	return errors.Join(errs...)
}
