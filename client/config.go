package client

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/process"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Protocols a destination speaks.
const (
	// ProtocolOTEP is otlpgate.otep.v1: UnaryExporter or StreamExporter, requests carry ids.
	ProtocolOTEP = "otep"
	// ProtocolV1 is the standard opentelemetry.proto.collector.*.v1 Export services.
	ProtocolV1 = "v1"
	// ProtocolHTTP is OTLP/HTTP: each batch is POSTed as application/x-protobuf to
	// {endpoint}/v1/{signal} (http.go). Unary mode only.
	ProtocolHTTP = "http"
	// ProtocolFile writes each batch as a line of OTLP/JSON to Path (client/filedest): an
	// archive beside the upstreams, counted under the same series.
	ProtocolFile = "file"
	// ProtocolKafka produces each batch as Kafka records to Kafka.Brokers (client/kafkadest),
	// in the encoding a Collector's Kafka receiver reads.
	ProtocolKafka = "kafka"
)

// Kafka encodings and partitioners of a ProtocolKafka destination.
const (
	KafkaOTLPProto       = "otlp_proto"
	KafkaOTLPJSON        = "otlp_json"
	KafkaRoundRobin      = "round_robin"
	KafkaByTraceID       = "trace_id"
	KafkaByResource      = "resource"
	KafkaSASLPlain       = "plain"
	KafkaSASLScramSHA256 = "scram-sha-256"
	KafkaSASLScramSHA512 = "scram-sha-512"
)

// Kafka configures a ProtocolKafka destination; its keys are refused for any other protocol.
type Kafka struct {
	// Brokers are the host:port addresses the client bootstraps from (brokers=a:9092,b:9092).
	Brokers []string
	// Topic is every signal's topic unless a signal's own is given (topic, as the Collector's
	// deprecated topic); TracesTopic, MetricsTopic and LogsTopic are each signal's
	// (traces-topic, metrics-topic, logs-topic; default otlp_spans, otlp_metrics, otlp_logs,
	// the Collector's Kafka exporter's).
	Topic, TracesTopic, MetricsTopic, LogsTopic string
	// Encoding of a record's value: KafkaOTLPProto, an Export*ServiceRequest, or KafkaOTLPJSON,
	// its OTLP/JSON (encoding, default otlp_proto).
	Encoding string
	// Partition is KafkaRoundRobin, KafkaByTraceID (a record per trace keyed by its trace id in
	// hex, as the Collector's partition_traces_by_id) or KafkaByResource (records keyed by a
	// hash of their resource's attributes) (partition, default round_robin).
	Partition string
	// MaxMessageBytes bounds a record batch as the topic's max.message.bytes does; a batch's
	// requests are cut into records below it (max-message-bytes; 0: 1000000, the Collector's
	// producer default, MaxMessage).
	MaxMessageBytes int
	// SASLMechanism is "", KafkaSASLPlain, KafkaSASLScramSHA256 or KafkaSASLScramSHA512
	// (sasl-mechanism); SASLUsername (sasl-username) and the password read from a file
	// (sasl-password-file) go with it.
	SASLMechanism, SASLUsername string
	SASLPasswordFile            string
	// password is what sasl-password-file held when the value was read; unexported so that
	// nothing prints or serialises it.
	password string
}

// Password is the SASL password read from SASLPasswordFile. Safe for concurrent use.
func (k Kafka) Password() string { return k.password }

// given reports whether any Kafka setting is set.
func (k Kafka) given() bool {
	return len(k.Brokers) > 0 || k.Topic != "" || k.TracesTopic != "" || k.MetricsTopic != "" ||
		k.LogsTopic != "" || k.Encoding != "" || k.Partition != "" || k.MaxMessageBytes != 0 ||
		k.SASLMechanism != "" || k.SASLUsername != "" || k.SASLPasswordFile != ""
}

// Modes a destination sends in.
const (
	// ModeStream pipelines requests over Streams streams, each with Window unacknowledged
	// requests at most, acknowledged by id in any order. OTEP only.
	ModeStream = "stream"
	// ModeUnary runs Concurrency workers per signal, each with one call in flight.
	ModeUnary = "unary"
)

// TLS configures the transport security of one destination.
type TLS struct {
	// Insecure sends in plaintext (tls=false or insecure=true in -dest). Default true, because
	// otlpgate's own intake listens in plaintext unless given a certificate; any tls-* key
	// turns TLS on.
	Insecure bool
	// CAFile verifies the server with these roots instead of the system pool (tls-ca).
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS (tls-cert, tls-key).
	CertFile, KeyFile string
	// ServerName overrides the name checked against the server certificate (tls-server-name).
	ServerName string
	// InsecureSkipVerify accepts any server certificate (tls-insecure-skip-verify). Tests only.
	InsecureSkipVerify bool
}

// Config of one destination, set by one -dest flag. The -dest key of each field is given in
// parentheses; ParseDest reads them.
type Config struct {
	// Name labels the destination in metrics and logs (name). Required, unique per process.
	Name string
	// Endpoint is host:port, or a gRPC target such as dns:///host:port (endpoint). Required.
	// For ProtocolHTTP it is a URL, http://host:port or https://host:port, optionally with a
	// base path that the signal paths are appended to, as OTEL_EXPORTER_OTLP_ENDPOINT is.
	Endpoint string
	// Path is the file a ProtocolFile destination appends to (path); its directory is created.
	// Required for protocol file, refused for the others.
	Path string
	// Protocol is ProtocolOTEP, ProtocolV1 or ProtocolHTTP (protocol, default v1, the standard
	// OTLP/gRPC that every OTLP receiver serves; ParseDest makes it http for an http:// or
	// https:// endpoint). OTEP is otlpgate's own service: only otlpgate serves it.
	Protocol string
	// TracesPath, MetricsPath and LogsPath replace the path a signal is POSTed to, whole
	// (traces-path, metrics-path, logs-path; default the endpoint's path followed by
	// /v1/traces, /v1/metrics, /v1/logs). ProtocolHTTP only.
	TracesPath, MetricsPath, LogsPath string
	// Mode is ModeStream or ModeUnary (mode, default unary; ParseDest makes it stream for
	// protocol=otep). v1 and http have no streaming service.
	Mode string
	// Transport is the gRPC transport of a v1 or otep destination (transport):
	// TransportOtlpgate, otlpgate's own HTTP/2 (ParseDest's default for a host:port
	// endpoint), or TransportGRPCGo (DefaultConfig's, also for "", and ParseDest's for a gRPC
	// target URI such as dns:///name:port). The own client (h2conn.go) makes v1 and OTEP
	// unary calls and OTEP streams (h2stream.go).
	Transport string
	// Streams is how many streams stream mode keeps open per signal (streams, default 2).
	Streams int
	// Window is how many requests one stream may have unacknowledged (window, default 64).
	Window int
	// MaxInFlight caps the unacknowledged requests of one signal across all streams, including
	// half-closed ones still draining after a re-balance (max-in-flight, default 0: Streams x
	// Window). Without it a re-balanced stream's pending requests would come on top of the new
	// stream's window; with streams=1,window=1 it makes stream mode strictly one at a time.
	MaxInFlight int
	// Concurrency is how many unary calls of one signal may be in flight at once (concurrency,
	// default 8): each signal has its own workers, so one whose upstream stops answering does
	// not hold up the others.
	Concurrency int
	// Compression is "", gzip, zstd or snappy (compression, default none); ProtocolHTTP takes
	// gzip or zstd, sent with Content-Encoding. The compressor must be registered
	// (codec.RegisterCompressors) before New.
	Compression string
	// QueueBytes bounds the bytes the destination holds: queued, in flight and waiting for a
	// retry (queue-bytes, default 128MiB). Past it Enqueue refuses batches with pipeline.ErrFull,
	// counted in otlpgate_fastpath_destination_refused_batches_total.
	QueueBytes int64
	// AckTimeout is how long a request may wait for its answer once the transport took it (for
	// ProtocolHTTP: the whole exchange, connecting included); in stream mode the time its
	// stream is blocked on flow control meanwhile does not count. Past it the request is sent
	// again (stream mode: at once, on a new stream when its stream answered nothing since;
	// unary and http: after the backoff), counted in otlpgate_client_ack_timeouts_total, within
	// RetryMaxElapsed; with RetryOnReconnect off a stream request is dropped instead
	// (otlpgate_client_dropped_requests_total{reason="ack_timeout"}) (ack-timeout, default 30s).
	AckTimeout time.Duration
	// RetryInitial, RetryMax and RetryMaxElapsed shape the exponential backoff, with jitter, of
	// FailedRetryable answers and transport errors: the first delay, the largest delay, and how
	// long after the destination took a request it may still be sent or retried, connection
	// attempts included (retry-initial, default 500ms;
	// retry-max, default 30s; retry-max-elapsed, default 5m, 0: no limit). Requests past it
	// are counted in otlpgate_client_dropped_requests_total{reason="retry_exhausted"}.
	RetryInitial, RetryMax, RetryMaxElapsed time.Duration
	// RebalanceTimeout and RebalanceRequests half-close a stream after this long or this many
	// requests, so that load balancers can spread the new one (rebalance-timeout, default 5m;
	// rebalance-requests, default 100000; 0 turns a limit off). Both are below the server's
	// defaults (-grpc.stream.max-age 15m, -grpc.stream.max-requests 1000000), so that the
	// client re-balances first, without losing the requests in flight.
	RebalanceTimeout  time.Duration
	RebalanceRequests int64
	// RebalanceBytes half-closes a stream before the next request would take the bytes sent on
	// it past this size (rebalance-bytes, default 960KiB; 0: off). An L7 balancer may cap a
	// request's body and count a whole gRPC stream as one request: nginx's default
	// client_max_body_size of 1m resets a stream past it, and the requests pending on it are
	// then sent again. A stream that sits idle past RebalanceTimeout is half-closed too, so that
	// a quiet signal does not pin its balancer backend; its next request opens a new one.
	RebalanceBytes int64
	// RetryOnReconnect re-sends the requests pending on a stream that broke or past AckTimeout
	// (retry-on-reconnect, default true). The server may have received them: the re-sends are
	// counted in otlpgate_client_resent_requests_total as possible duplicates. When false they
	// are dropped with reason "stream_broken" or "ack_timeout" (also with a spool: the records
	// are then dropped from it, counted).
	RetryOnReconnect bool
	// PoisonAfter drops, as a request the upstream can never take, one that was alone on this
	// many streams that each ended with INTERNAL (each counted once the upstream answered
	// another request, or an empty probe, since: see poison.go), or RESOURCE_EXHAUSTED without a RetryInfo (a
	// message over the upstream's receive limit) (poison-after, default 3; 0: never), counted in
	// otlpgate_client_dropped_requests_total{reason="stream_poison"}. grpc-go and the Collector
	// end a whole stream with INTERNAL when they cannot decode one request on it, and a proxy's
	// reset reads the same: so the requests pending on such a stream are sent again one at a
	// time, each waiting for its answer, which delivers the innocent ones and finds the one that
	// breaks every stream it is sent on. Without it that request would be sent again for ever
	// with a spool (RetryMaxElapsed 0), taking down the others pending with it each time.
	PoisonAfter int
	// WaitOnShutdown lets Shutdown wait for pending acknowledgements until its context ends
	// (wait-on-shutdown, default true).
	WaitOnShutdown bool
	// TLS of the connection.
	TLS TLS
	// InitialWindowSize and InitialConnWindowSize are the HTTP/2 flow-control windows per stream
	// and per connection (http2-stream-window, default 1MiB; http2-conn-window, default 8MiB).
	// Pipelined streams on long round trips need windows of about window × batch size.
	InitialWindowSize, InitialConnWindowSize int32
	// WriteBufferSize and ReadBufferSize of the connection (write-buffer, read-buffer, default
	// 256KiB each). gRPC writes its buffer out whenever it fills, so a batch of B bytes costs
	// about B/WriteBufferSize write calls (grpc-go's own default, 32KiB, makes 32 for 1MiB).
	WriteBufferSize, ReadBufferSize int
	// ZeroBuffers has grpc-go's own pool serve the buffers the connection reads frames into,
	// zeroing each (zero-buffers, default false); by default they come from pool/'s tiers
	// unzeroed, as gRPC fills them before it reads them.
	ZeroBuffers bool
	// MaxSendMsgSize is the largest request sent (max-send-msg-size, default 16MiB, the
	// default -grpc.max-recv-msg-size of otlpgate). Larger batches are dropped with reason
	// "too_large".
	MaxSendMsgSize int
	// MaxRecvMsgSize is the largest answer read from the upstream (max-recv-msg-size, default
	// 4MiB, grpc-go's own default): an Export*ServiceResponse, an OTEP answer or an OTLP/HTTP
	// body is a few hundred bytes, and this bounds what one an upstream sends may cost. A
	// larger answer to a request the upstream took is not read (answer.go): the request counts
	// as delivered, never as dropped, and the answer in
	// otlpgate_client_unreadable_answers_total.
	MaxRecvMsgSize int
	// KeepaliveTime pings the server after this long without activity, KeepaliveTimeout drops
	// the connection when the ping is not answered (keepalive-time, default 30s;
	// keepalive-timeout, default 10s). 0 turns pings off.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// Headers are sent with every call (header=key:value, repeatable; header-file=key:/path,
	// the value read from the file by ParseDest, each time it runs). ProtocolHTTP may not set
	// the headers it owns (content-type, content-encoding, content-length, host, connection,
	// transfer-encoding).
	Headers map[string]string
	// BearerTokenFile holds a token sent as "authorization: Bearer <token>"
	// (bearer-token-file). Read by ReadBearerToken, each time it runs (a gateway does at every
	// reading of its destinations, SIGHUP included), or else once, by New.
	BearerTokenFile string
	// ForwardHeaders are tenant headers (of -intake.headers) whose values are sent with each
	// batch, as gRPC metadata, HTTP headers or Kafka record headers, taken from the batch's
	// tenant; an empty value is not sent (forward-headers=NAME|NAME). gRPC sends metadata once
	// per call or stream, so it needs mode=unary, or protocol=http or kafka.
	ForwardHeaders []string
	// SpoolID names the destination in the spool (spool-id, default Name): its cursor, and so
	// the records it still owes, go by it. A destination renamed with spool-id set to its old
	// name keeps its backlog, across a reload and a restart. The client does not use it.
	SpoolID string
	// MatchHeader selects the tenants whose batches the destination takes
	// (match-header=NAME:VALUE|VALUE, or NAME:* for every value); without it the destination
	// takes the tenants that no destination with named values takes. The pipeline and the
	// spool's feeders apply it (tenant.Config.Routes); cmd checks NAME against
	// -intake.headers.
	MatchHeader tenant.Match
	// Route selects the resources the destination takes (match=resource:KEY=VALUE, PREFIX*,
	// or V1|V2): those whose attribute KEY matches; nil takes the resources that no
	// destination with a Route takes. The gateway builds the pipeline's process.Router from
	// every destination's; a request whose resources go different ways is split.
	Route []process.Match
	// Signals is what the destination takes (signals=traces,logs; the zero set: every
	// signal). The pipeline hands it only batches of those, its spool feeder passes over the
	// others' records, and a request of a signal no destination takes is refused at the
	// intake.
	Signals fastpath.SignalSet

	// Balanced destinations (a Fleet, NewFleet): with Resolver set, the destination names a
	// set of backends, each a full destination built from the other settings.
	//
	// Resolver is static (Endpoints), dns (Endpoint's host re-resolved every ResolveInterval)
	// or file (EndpointsFile re-read when it changes and on Reload); "" for a plain
	// destination (resolver).
	Resolver string
	// Endpoints is the static list of host:port backends (endpoints=a|b|c).
	Endpoints []string
	// EndpointsFile holds one host:port per line; blank lines and # comments are skipped
	// (endpoints-file).
	EndpointsFile string
	// ResolveInterval is how often DNS is asked again and the endpoints file checked for a
	// change (resolve-interval, default 5s).
	ResolveInterval time.Duration
	// Balance is the key batches are split by: trace_id, service or resource (balance,
	// default trace_id).
	Balance string
	// EjectAfter takes a backend out of the set once it has failed for this long: requests
	// outstanding and none acknowledged; its data goes to the other backends and it comes back
	// once it connects again (eject-after, default 30s; 0: never).
	EjectAfter time.Duration
	// Lookup resolves host names for resolver=dns; nil: the system resolver. Tests set it.
	Lookup HostResolver

	// Kafka holds the settings of a ProtocolKafka destination.
	Kafka Kafka

	// Tally, when set, adds up what the destination delivered and dropped, by reason, with
	// every other destination given the same Tally (the backends of a fleet among them): the
	// gateway reports it when it stops. Not a -dest key.
	Tally *Tally

	// fleetMember marks the configuration of one backend of a balanced destination
	// (Config.member), which makes fewer streams ahead of traffic (Dest.prefillStreams).
	fleetMember bool

	// bearer is the authorization value ReadBearerToken read from BearerTokenFile. It is part
	// of the configuration so that two readings of a rotated file differ (a gateway replaces
	// the destination), and unexported so that nothing prints or serialises it.
	bearer string
}

// ReadBearerToken reads BearerTokenFile (when set) into c, for New and the backends of a
// balanced destination to send: without it New reads the file itself. A gateway calls it each
// time it reads its destinations, so that a rotated token makes the configuration differ from
// the running one. The error names the file, never the token.
func (c *Config) ReadBearerToken() error {
	if c.BearerTokenFile == "" {
		c.bearer = ""
		return nil
	}
	v, err := bearerAuth(c.BearerTokenFile)
	if err != nil {
		return err
	}
	c.bearer = v
	return nil
}

// authorization is the bearer token's authorization value, "" without bearer-token-file: the
// one ReadBearerToken read, or else the file's content now.
func (c Config) authorization() (string, error) {
	if c.bearer != "" || c.BearerTokenFile == "" {
		return c.bearer, nil
	}
	return bearerAuth(c.BearerTokenFile)
}

// Resolvers of a balanced destination.
const (
	ResolverStatic = "static"
	ResolverDNS    = "dns"
	ResolverFile   = "file"
)

// DefaultConfig returns the defaults documented on Config. Name and Endpoint are empty.
func DefaultConfig() Config {
	return Config{
		Protocol:              ProtocolV1,
		Mode:                  ModeUnary,
		Transport:             TransportGRPCGo,
		Streams:               2,
		Window:                64,
		Concurrency:           8,
		QueueBytes:            128 << 20,
		AckTimeout:            30 * time.Second,
		RetryInitial:          500 * time.Millisecond,
		RetryMax:              30 * time.Second,
		RetryMaxElapsed:       5 * time.Minute,
		RebalanceTimeout:      5 * time.Minute,
		RebalanceRequests:     100_000,
		RebalanceBytes:        960 << 10,
		RetryOnReconnect:      true,
		PoisonAfter:           3,
		WaitOnShutdown:        true,
		TLS:                   TLS{Insecure: true},
		InitialWindowSize:     1 << 20,
		InitialConnWindowSize: 8 << 20,
		WriteBufferSize:       256 << 10,
		ReadBufferSize:        256 << 10,
		MaxSendMsgSize:        16 << 20,
		MaxRecvMsgSize:        4 << 20,
		KeepaliveTime:         30 * time.Second,
		KeepaliveTimeout:      10 * time.Second,
		ResolveInterval:       5 * time.Second,
		Balance:               "trace_id",
		EjectAfter:            30 * time.Second,
	}
}

// Validate reports the first setting that cannot work, naming the destination.
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		if c.Name == "" {
			return fmt.Errorf("client: %w", err)
		}
		return fmt.Errorf("client: destination %q: %w", c.Name, err)
	}
	return nil
}

func (c Config) validate() error {
	switch {
	case c.Name == "":
		return errors.New("name is required")
	case strings.ContainsAny(c.Name, ",= \t\n"):
		return fmt.Errorf("name %q holds a comma, an equals sign or a space", c.Name)
	}
	if c.Protocol == ProtocolFile {
		return c.validateFile()
	}
	if c.Protocol == ProtocolKafka {
		return c.validateKafka()
	}
	if c.Kafka.given() {
		return fmt.Errorf("brokers, topics, encoding, partition, max-message-bytes and sasl-* are for protocol kafka, not %s", c.Protocol)
	}
	if c.Path != "" {
		return fmt.Errorf("path is for protocol file, not %s", c.Protocol)
	}
	if err := c.validateFleet(); err != nil {
		return err
	}
	if c.Endpoint == "" && c.Resolver != ResolverStatic && c.Resolver != ResolverFile {
		return errors.New("endpoint is required")
	}
	switch c.Protocol {
	case ProtocolOTEP, ProtocolV1:
		if c.TracesPath != "" || c.MetricsPath != "" || c.LogsPath != "" {
			return fmt.Errorf("signal paths are for protocol http, not %s", c.Protocol)
		}
	case ProtocolHTTP:
		if err := c.validateHTTP(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("protocol %q (want otep, v1, http, file or kafka)", c.Protocol)
	}
	if c.Resolver != "" && c.Protocol == ProtocolHTTP {
		return errors.New("a balanced destination (resolver=) speaks otep or v1, not http")
	}
	if c.Protocol != ProtocolHTTP && c.Endpoint != "" && !strings.Contains(c.Endpoint, ":///") {
		if _, _, err := net.SplitHostPort(c.Endpoint); err != nil {
			return fmt.Errorf("endpoint %q is not host:port: %w", c.Endpoint, err)
		}
	}
	switch c.Mode {
	case ModeStream, ModeUnary:
	default:
		return fmt.Errorf("mode %q (want stream or unary)", c.Mode)
	}
	if err := c.validateTransport(); err != nil {
		return err
	}
	switch c.Compression {
	case "", "none", "gzip", "zstd", "snappy":
	default:
		return fmt.Errorf("compression %q (want gzip, zstd, snappy or none)", c.Compression)
	}
	switch {
	case c.Protocol == ProtocolV1 && c.Mode == ModeStream:
		return errors.New("protocol v1 has no streaming service: use mode=unary with concurrency, or protocol=otep for an otlpgate upstream")
	case c.Protocol == ProtocolHTTP && c.Mode == ModeStream:
		return errors.New("protocol http has no streaming: use mode=unary with concurrency")
	case c.Streams < 1 || c.Streams > 1024:
		return fmt.Errorf("streams %d outside 1..1024", c.Streams)
	case c.Window < 1 || c.Window > 1<<16:
		return fmt.Errorf("window %d outside 1..65536", c.Window)
	case c.Concurrency < 1 || c.Concurrency > 4096:
		return fmt.Errorf("concurrency %d outside 1..4096", c.Concurrency)
	case c.QueueBytes <= 0:
		return errors.New("queue bytes must be positive")
	case c.AckTimeout <= 0:
		return errors.New("ack timeout must be positive")
	case c.RetryInitial <= 0:
		return errors.New("retry initial must be positive")
	case c.RetryMax < c.RetryInitial:
		return fmt.Errorf("retry max %v is below retry initial %v", c.RetryMax, c.RetryInitial)
	case c.MaxInFlight < 0:
		return errors.New("max-in-flight must not be negative")
	case c.RetryMaxElapsed < 0:
		return errors.New("retry max elapsed must not be negative (0: no limit)")
	case c.PoisonAfter < 0:
		return errors.New("poison-after must not be negative (0: never)")
	case c.RebalanceTimeout < 0 || c.RebalanceRequests < 0 || c.RebalanceBytes < 0:
		return errors.New("rebalance limits must not be negative (0: off)")
	case c.WriteBufferSize < 0 || c.ReadBufferSize < 0:
		return errors.New("write-buffer and read-buffer must not be negative")
	case c.InitialWindowSize < 64<<10 || c.InitialConnWindowSize < 64<<10:
		return errors.New("HTTP/2 windows must be at least 64KiB")
	case c.MaxSendMsgSize <= 0:
		return errors.New("max send message size must be positive")
	case c.MaxRecvMsgSize <= 0:
		return errors.New("max-recv-msg-size must be positive")
	case c.KeepaliveTime < 0 || c.KeepaliveTimeout < 0:
		return errors.New("keepalive durations must not be negative")
	case c.KeepaliveTime > 0 && c.KeepaliveTime < 10*time.Second:
		// gRPC raises shorter intervals to 10s anyway; otlpgate servers reject them by default.
		return fmt.Errorf("keepalive time %v is below 10s", c.KeepaliveTime)
	}
	t := c.TLS
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		return errors.New("TLS needs both tls-cert and tls-key")
	case t.Insecure && (t.CAFile != "" || t.CertFile != "" || t.ServerName != "" || t.InsecureSkipVerify):
		return errors.New("tls-* options given for a plaintext destination (insecure=true)")
	}
	for k := range c.Headers {
		if k == "" || strings.ToLower(k) != k || strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
			return fmt.Errorf("header %q: names must be lower case and not reserved", k)
		}
	}
	return c.validateForward()
}

// validateForward checks forward-headers: tenant header names, not set by header= as well, on
// a destination that sends metadata per batch.
func (c Config) validateForward() error {
	if len(c.ForwardHeaders) == 0 {
		return nil
	}
	if c.stream() {
		return errors.New("forward-headers needs mode=unary (or protocol=http): gRPC sends metadata once per stream, and a stream carries the batches of every tenant")
	}
	for i, h := range c.ForwardHeaders {
		if h == "" || strings.ToLower(h) != h || strings.ContainsAny(h, " \t\r\n:,|\x00") {
			return fmt.Errorf("forward-headers: %q is not a lower-case header name", h)
		}
		if _, ok := c.Headers[h]; ok {
			return fmt.Errorf("forward-headers: %q is set by header= too", h)
		}
		if h == "authorization" || httpOwnedHeaders[h] || strings.HasPrefix(h, "grpc-") {
			return fmt.Errorf("forward-headers: %q is reserved", h)
		}
		for _, o := range c.ForwardHeaders[:i] {
			if o == h {
				return fmt.Errorf("forward-headers: %q named twice", h)
			}
		}
	}
	return nil
}

// stream reports whether the destination pipelines over streams.
func (c Config) stream() bool { return c.Mode == ModeStream }

// compressor is the grpc-encoding name, "" for none.
func (c Config) compressor() string {
	if c.Compression == "none" {
		return ""
	}
	return c.Compression
}

// httpOwnedHeaders are the headers the OTLP/HTTP sender sets itself, or that would change how
// the request is framed; header= may not set them.
var httpOwnedHeaders = map[string]bool{
	"content-type": true, "content-encoding": true, "content-length": true, "host": true,
	"connection": true, "transfer-encoding": true, "te": true, "upgrade": true, "trailer": true,
}

// validateHTTP checks what only ProtocolHTTP has: a URL endpoint whose scheme agrees with the
// TLS setting, the signal paths, the compressions HTTP speaks, and headers that cannot break
// the request's framing.
func (c Config) validateHTTP() error {
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return fmt.Errorf("endpoint %q: protocol http wants http://host:port or https://host:port: %w", c.Endpoint, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("endpoint %q: protocol http wants http://host:port or https://host:port", c.Endpoint)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("endpoint %q has no host", c.Endpoint)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("endpoint %q: no user, query or fragment allowed", c.Endpoint)
	case u.Scheme == "https" && c.TLS.Insecure:
		return fmt.Errorf("endpoint %q is https but the destination is plaintext (insecure=true or tls=false)", c.Endpoint)
	case u.Scheme == "http" && !c.TLS.Insecure:
		return fmt.Errorf("endpoint %q is http:// but TLS is on (tls-* keys or tls=true): use https://", c.Endpoint)
	}
	switch c.Compression {
	case "", "none", "gzip", "zstd":
	default:
		return fmt.Errorf("compression %q for protocol http (want gzip, zstd or none)", c.Compression)
	}
	for _, p := range [...]string{c.TracesPath, c.MetricsPath, c.LogsPath} {
		if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t\r\n")) {
			return fmt.Errorf("signal path %q must start with / and hold no query, fragment or space", p)
		}
	}
	for k, v := range c.Headers {
		if httpOwnedHeaders[k] || strings.ContainsAny(k, " \t\r\n:\x00") {
			return fmt.Errorf("header %q is set by the HTTP sender or is not a header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("header %q: the value holds a line break or NUL", k)
		}
	}
	return nil
}

// httpURIs are the full URIs each signal is POSTed to: the endpoint's scheme and host, then
// the signal's path (TracesPath and the like, or the endpoint's path with /v1/{signal}
// appended). Call on a validated Config.
func (c Config) httpURIs() [fastpath.NumSignals]string {
	u, _ := url.Parse(c.Endpoint)
	base := strings.TrimSuffix(u.Path, "/")
	paths := [fastpath.NumSignals]string{c.TracesPath, c.MetricsPath, c.LogsPath}
	for i, def := range [fastpath.NumSignals]string{"/v1/traces", "/v1/metrics", "/v1/logs"} {
		if paths[i] == "" {
			paths[i] = base + def
		}
		paths[i] = u.Scheme + "://" + u.Host + paths[i]
	}
	return paths
}

// validateFleet checks the keys of a balanced destination.
func (c Config) validateFleet() error {
	if c.Resolver == "" {
		if len(c.Endpoints) > 0 || c.EndpointsFile != "" {
			return errors.New("endpoints and endpoints-file need resolver=static or resolver=file")
		}
		return nil
	}
	if _, err := parseBalance(c.Balance); err != nil {
		return err
	}
	switch {
	case c.ResolveInterval <= 0:
		return errors.New("resolve-interval must be positive")
	case c.EjectAfter < 0:
		return errors.New("eject-after must not be negative (0: never)")
	}
	switch c.Resolver {
	case ResolverStatic:
		if len(c.Endpoints) == 0 || c.Endpoint != "" || c.EndpointsFile != "" {
			return errors.New("resolver=static takes endpoints=host:port|host:port, and neither endpoint nor endpoints-file")
		}
		for _, e := range c.Endpoints {
			if _, _, err := net.SplitHostPort(e); err != nil {
				return fmt.Errorf("endpoints: %q is not host:port: %w", e, err)
			}
		}
	case ResolverDNS:
		if c.Endpoint == "" || len(c.Endpoints) > 0 || c.EndpointsFile != "" || strings.Contains(c.Endpoint, ":///") {
			return errors.New("resolver=dns takes endpoint=host:port, and neither endpoints nor endpoints-file")
		}
	case ResolverFile:
		if c.EndpointsFile == "" || c.Endpoint != "" || len(c.Endpoints) > 0 {
			return errors.New("resolver=file takes endpoints-file=PATH, and neither endpoint nor endpoints")
		}
	default:
		return fmt.Errorf("resolver %q (want static, dns or file)", c.Resolver)
	}
	return nil
}

// validateFile checks a ProtocolFile destination: a path, and none of the keys that address an
// upstream, which it would ignore. Whether the directory can be created is found by
// filedest.New, which creates it.
func (c Config) validateFile() error {
	switch {
	case c.Path == "":
		return errors.New("path is required for protocol file (path=/var/lib/otlpgate/archive.jsonl)")
	case c.Endpoint != "" || c.Resolver != "" || len(c.Endpoints) > 0 || c.EndpointsFile != "":
		return errors.New("protocol file writes to path: endpoint, resolver and endpoints are for the upstreams")
	case c.QueueBytes <= 0:
		return errors.New("queue bytes must be positive")
	}
	return nil
}

// The gRPC transports of a destination (Config.Transport).
const (
	TransportGRPCGo   = "grpc-go"
	TransportOtlpgate = "otlpgate"
)

// h2 reports whether the destination calls its upstream with otlpgate's own transport.
func (c Config) h2() bool { return c.Transport == TransportOtlpgate }

// validateTransport refuses what the own transport does not do, by name, rather than falling
// back to grpc-go behind the operator's back: protocols other than gRPC's, gRPC targets.
func (c Config) validateTransport() error {
	switch c.Transport {
	case "", TransportGRPCGo:
		return nil
	case TransportOtlpgate:
	default:
		return fmt.Errorf("transport %q (want grpc-go or otlpgate)", c.Transport)
	}
	switch {
	case c.Protocol != ProtocolV1 && c.Protocol != ProtocolOTEP:
		return fmt.Errorf("transport=otlpgate is a gRPC transport (protocol v1 or otep), not for protocol %s", c.Protocol)
	case strings.Contains(c.Endpoint, ":///"):
		return fmt.Errorf("transport=otlpgate dials host:port, not the gRPC target %q: use transport=grpc-go", c.Endpoint)
	}
	return nil
}
