package client

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/process"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

// The keys of a -dest value live in one table, destKeys: ReadDest knows a key by it, Apply
// reads a value with it, and docs/destinations.md's key reference is generated from it
// (make docs). A new key is a field of Config and a row here, nothing else.

// DestKey is one key of a -dest value: how the reference shows it and how its value is read.
type DestKey struct {
	// Name is the key as written (retry-initial; a dot may stand for a dash: retry.initial).
	Name string
	// Takes is the form of its value (markdown); "" takes the setter's (SIZE, DURATION, ...).
	Takes string
	// Default is what applies without the key (markdown). A default of one value in
	// backquotes (`30s`) is the value DefaultConfig holds (TestDestKeyDefaults).
	Default string
	// Help says what it does (markdown).
	Help string
	// Section is the part of the reference the key is listed in: "" for every destination,
	// "fleet" for the keys of a balanced destination.
	Section string
	// Repeatable keys may be given more than once; any other key given twice is refused.
	Repeatable bool
	// Sep separates the items of a key whose value is a list (endpoints=a|b: "|"), "" for
	// any other key: a list written otherwise (a config file's) is joined with it.
	Sep string
	// Secret keys' values are never repeated in an error (a header's value is an API key).
	Secret bool

	read setter
}

// setter reads one key's value into a Config.
type setter struct {
	takes string                          // the form of the value, for the reference
	sep   string                          // DestKey.Sep
	set   func(c *Config, v string) error // reads v into c
	// more reads an item after the key's that holds no '=': its value is a list that goes on
	// past the comma that separates items (signals=traces,logs). nil: the key takes none.
	more func(c *Config, v string) error
	// named: set's errors name the key and the value already (process.ParseRoute's: match
	// "x": ...), and are reported as they are.
	named bool
}

// Sections of the key reference.
const (
	DestKeysMain  = ""
	DestKeysFleet = "fleet"
	DestKeysKafka = "kafka"
)

var destKeys = []DestKey{
	{Name: "name", Default: "required", read: text("NAME", func(c *Config) *string { return &c.Name }),
		Help: "the destination's label in metrics and logs; unique among the destinations, without a comma, `=` or white space"},
	{Name: "endpoint", Default: "required", read: text("`host:port` or URL", func(c *Config) *string { return &c.Endpoint }),
		Help: "`host:port` or a gRPC target; for `protocol=http` a URL, `http://host:port` or `https://host:port`, optionally with a base path; with `resolver=dns` the name whose A and AAAA records are the backends ([fleet](#balancing-across-a-gateway-fleet)); refused with `protocol=file`"},
	{Name: "spool-id", Default: "the `name`", read: text("NAME", func(c *Config) *string { return &c.SpoolID }),
		Help: "with `-spool.dir`, what the spool knows the destination by: its position, and so the records it still owes, go by it. To rename a destination and keep its backlog, give the new name `spool-id=<old name>` (keep it there for as long as the spool holds records for it; two destinations may not share one)"},
	{Name: "protocol", Default: "`v1`; `http` for an `http://` or `https://` endpoint", read: text("`v1`, `http`, `otep`, `file` or `kafka`", func(c *Config) *string { return &c.Protocol }),
		Help: "`v1` (standard OTLP/gRPC services), `http` (OTLP/HTTP, [below](#otlphttp-destinations-protocolhttp)), `file` (OTLP/JSON lines, [below](#file-destinations-protocolfile)), `kafka` (records of a Kafka topic, [below](#kafka-destinations-protocolkafka)) or `otep` (`otlpgate.otep.v1` services, which only otlpgate serves)"},
	{Name: "path", Default: "none", read: text("PATH", func(c *Config) *string { return &c.Path }),
		Help: "`protocol=file` only, and required there: the OTLP/JSON lines file ([file destinations](#file-destinations-protocolfile))"},
	{Name: "mode", Default: "`unary`; `stream` for `otep`", read: text("`unary` or `stream`", func(c *Config) *string { return &c.Mode }),
		Help: "`stream` (`otep` only): pipelined streams, acks matched by id in any order; `unary`: one call per request"},
	{Name: "transport", Default: "`otlpgate`; `grpc-go` for a `dns:///` target", read: text("`grpc-go` or `otlpgate`", func(c *Config) *string { return &c.Transport }),
		Help: "the gRPC client of a `v1` or `otep` destination: `grpc-go`, or `otlpgate`, otlpgate's own HTTP/2 transport ([below](#the-own-grpc-client-transportotlpgate)): unary calls and OTEP streams, to a `host:port` endpoint; h2c, or TLS with ALPN `h2`"},
	{Name: "streams", Default: "`2`", read: integer(func(c *Config) *int { return &c.Streams }),
		Help: "stream mode: streams per signal"},
	{Name: "window", Default: "`64`", read: integer(func(c *Config) *int { return &c.Window }),
		Help: "stream mode: unacknowledged requests per stream"},
	{Name: "max-in-flight", Default: "streams x window", read: integer(func(c *Config) *int { return &c.MaxInFlight }),
		Help: "stream mode: unacknowledged requests per signal across all streams, draining ones included"},
	{Name: "concurrency", Default: "`8`", read: integer(func(c *Config) *int { return &c.Concurrency }),
		Help: "unary calls in flight per signal; for `http` also the kept-alive connections per signal"},
	{Name: "compression", Default: "none", read: text("`gzip`, `zstd` or `snappy`", func(c *Config) *string { return &c.Compression }),
		Help: "`gzip`, `zstd` or `snappy`; `http`: `gzip` or `zstd`, sent as `Content-Encoding`. With `gzip` or `zstd` on `http` and `v1`, requests that arrived over OTLP/HTTP (or over gRPC v1 in `-grpc.passthrough-encoding`) compressed the same way are sent as received, without compressing them again, when every destination does the same ([compressed pass-through](intakes/otlp-http.md#compressed-pass-through--compressionpassthrough-default-on))"},
	{Name: "traces-path", Default: "endpoint path + `/v1/traces`", read: text("PATH", func(c *Config) *string { return &c.TracesPath }),
		Help: "`http` only: the whole path traces are POSTed to"},
	{Name: "metrics-path", Default: "endpoint path + `/v1/metrics`", read: text("PATH", func(c *Config) *string { return &c.MetricsPath }),
		Help: "`http` only: the whole path metrics are POSTed to"},
	{Name: "logs-path", Default: "endpoint path + `/v1/logs`", read: text("PATH", func(c *Config) *string { return &c.LogsPath }),
		Help: "`http` only: the whole path logs are POSTed to"},
	{Name: "queue-bytes", Default: "`-queue.max-bytes` (one destination) or half of it (several)", read: size(1<<62, func(c *Config) *int64 { return &c.QueueBytes }),
		Help: "bytes the destination may hold, all signals together (each signal has its own queue and senders: one the upstream stops answering does not hold up the others' sends); past it batches are refused at hand-over and counted"},
	{Name: "ack-timeout", Default: "`30s`", read: duration(func(c *Config) *time.Duration { return &c.AckTimeout }),
		Help: "a request unanswered this long is sent again, as often as it takes within `retry-max-elapsed` (counted in `otlpgate_client_ack_timeouts_total`): stream mode re-sends it at once, on a new stream when its stream answered nothing since it went out (that stream is given up and everything pending on it goes again); unary and `http` retry it after the backoff. The clock starts when the transport took the request: waiting for a connection, a stream or flow-control window before that, and in stream mode the time the stream stays blocked on flow control afterwards, do not count"},
	{Name: "retry-initial", Default: "`500ms`", read: duration(func(c *Config) *time.Duration { return &c.RetryInitial }),
		Help: "the first delay of the exponential backoff, with jitter, after a `FailedRetryable` answer or a transport error"},
	{Name: "retry-max", Default: "`30s`", read: duration(func(c *Config) *time.Duration { return &c.RetryMax }),
		Help: "the longest backoff delay; a `FailedRetryable` answer's `retry_delay_ms` (an upstream otlpgate's `-tenant.rate`) is a minimum for that request alone. After an outage the destination's first success ends the backoff of what waits for the upstream to come back, once per request: unary calls that failed with a retryable status and no `RetryInfo` (`UNAVAILABLE`, `ABORTED`, a broken connection), `http` requests that could not connect, stream lanes asleep after their streams broke"},
	{Name: "retry-max-elapsed", Default: "`5m`", read: duration(func(c *Config) *time.Duration { return &c.RetryMaxElapsed }),
		Help: "how long after the destination took a batch it may still be sent or retried; 0: no limit. Refused with `-spool.dir`, whose destinations retry until the spool is full"},
	{Name: "rebalance-timeout", Default: "`5m`", read: duration(func(c *Config) *time.Duration { return &c.RebalanceTimeout }),
		Help: "stream mode: half-close a stream this long after it opened and open a new one (acks keep being read on the old one); a stream idle past it is half-closed at once, so a quiet signal does not pin a balancer backend, and the next request opens a new one; 0: never"},
	{Name: "rebalance-requests", Default: "`100000`", read: integer64(func(c *Config) *int64 { return &c.RebalanceRequests }),
		Help: "stream mode: half-close a stream after this many requests and open a new one; 0: never"},
	{Name: "rebalance-bytes", Default: "`960KiB`", read: size(1<<62, func(c *Config) *int64 { return &c.RebalanceBytes }),
		Help: "half-close a stream before the next request would take the bytes sent on it past this (gRPC prefixes included); L7 balancers may count a whole stream as one request body (nginx's default `client_max_body_size 1m` resets longer streams); 0 turns it off"},
	{Name: "retry-on-reconnect", Default: "`true`", read: boolean(func(c *Config) *bool { return &c.RetryOnReconnect }),
		Help: "re-send requests pending on a broken stream or past `ack-timeout` (duplicates possible, counted in `otlpgate_client_resent_requests_total`); `false` drops them (`stream_broken`, `ack_timeout`), with a spool too"},
	{Name: "poison-after", Default: "`3`", read: integer(func(c *Config) *int { return &c.PoisonAfter }),
		Help: "stream mode: a request alone on this many streams that each ended with `INTERNAL`, while the upstream answered other requests or an empty probe, is dropped as one the upstream cannot decode (`reason=\"stream_poison\"`, also with a spool); 0: never, it is sent again like any other. The requests pending on a stream that ended with `INTERNAL` are sent again one at a time, each waiting for its answer, then the stream pipelines again"},
	{Name: "wait-on-shutdown", Default: "`true`", read: boolean(func(c *Config) *bool { return &c.WaitOnShutdown }),
		Help: "wait for pending acks up to `-shutdown.timeout`; the rest is counted as lost by reason"},
	{Name: "tls", Default: "`false`", read: setter{takes: "`true` or `false`", set: func(c *Config, v string) error {
		on, err := strconv.ParseBool(v)
		c.TLS.Insecure = !on
		return err
	}},
		Help: "`true`: TLS, verified with the system's roots unless `tls-ca` names others; `false`: plaintext, which a `tls-*` key contradicts. Any `tls-*` key turns TLS on; for `http` an `https://` endpoint does, and the scheme must agree with the keys"},
	{Name: "insecure", Default: "`true`", read: boolean(func(c *Config) *bool { return &c.TLS.Insecure }),
		Help: "`true`: plaintext, as `tls=false`"},
	{Name: "tls-ca", Default: "the system's roots", read: text("FILE", func(c *Config) *string { return &c.TLS.CAFile }),
		Help: "verify the server with the roots of this PEM file; turns TLS on"},
	{Name: "tls-cert", Default: "none", read: text("FILE", func(c *Config) *string { return &c.TLS.CertFile }),
		Help: "the client certificate for mutual TLS, with `tls-key`; turns TLS on"},
	{Name: "tls-key", Default: "none", read: text("FILE", func(c *Config) *string { return &c.TLS.KeyFile }),
		Help: "the client certificate's key, with `tls-cert`; turns TLS on"},
	{Name: "tls-server-name", Default: "the endpoint's host", read: text("NAME", func(c *Config) *string { return &c.TLS.ServerName }),
		Help: "the name checked against the server's certificate; turns TLS on"},
	{Name: "tls-insecure-skip-verify", Default: "`false`", read: boolean(func(c *Config) *bool { return &c.TLS.InsecureSkipVerify }),
		Help: "accept any server certificate (for tests); turns TLS on"},
	{Name: "http2-stream-window", Default: "`1MiB`", read: size(1<<31-1, func(c *Config) *int32 { return &c.InitialWindowSize }),
		Help: "HTTP/2 flow-control window of a stream: keep it above window x batch size on long round trips"},
	{Name: "http2-conn-window", Default: "`8MiB`", read: size(1<<31-1, func(c *Config) *int32 { return &c.InitialConnWindowSize }),
		Help: "HTTP/2 flow-control window of the connection"},
	{Name: "write-buffer", Default: "`256KiB`", read: size(1<<30, func(c *Config) *int { return &c.WriteBufferSize }),
		Help: "the connection's write buffer; gRPC writes the buffer out each time it fills, so a 1MiB batch costs 4 write calls instead of the 32 of grpc-go's 32KiB default (traced with `strace -e write` under large batches at 8 in flight: 249 KiB per upstream write against 32 KiB with `write-buffer=32KiB`)"},
	{Name: "read-buffer", Default: "`256KiB`", read: size(1<<30, func(c *Config) *int { return &c.ReadBufferSize }),
		Help: "the connection's read buffer"},
	{Name: "zero-buffers", Default: "`false`", read: boolean(func(c *Config) *bool { return &c.ZeroBuffers }),
		Help: "take the buffers the connection reads frames into from grpc-go's pool, which zeroes each one, instead of otlpgate's byte pool, which does not (gRPC fills them before they are read)"},
	{Name: "max-send-msg-size", Default: "`16MiB`", read: size(1<<31-1, func(c *Config) *int { return &c.MaxSendMsgSize }),
		Help: "larger batches are dropped and counted"},
	{Name: "max-recv-msg-size", Default: "`4MiB`", read: size(1<<31-1, func(c *Config) *int { return &c.MaxRecvMsgSize }),
		Help: "the largest answer read from the upstream (grpc-go's receive limit, the OTLP/HTTP body); a larger answer to a request the upstream took is not read, and the request counts as delivered, never as dropped: `otlpgate_client_unreadable_answers_total`, a log line at most once a second, the status page's last error ([below](#answers-otlpgate-cannot-read))"},
	{Name: "keepalive-time", Default: "`30s`", read: duration(func(c *Config) *time.Duration { return &c.KeepaliveTime }),
		Help: "ping the upstream after this long without activity, to detect a dead connection (one that black-holes while a stream waits on flow control is replaced by the pings alone: flow-control time does not count against `ack-timeout`); 0: no pings"},
	{Name: "keepalive-timeout", Default: "`10s`", read: duration(func(c *Config) *time.Duration { return &c.KeepaliveTimeout }),
		Help: "drop the connection when a ping is not answered within this"},
	{Name: "header", Default: "none", Repeatable: true, Secret: true, read: setter{takes: "`KEY:VALUE`", set: setHeader},
		Help: "a header sent with every call; `http` refuses headers that frame the request (`content-type`, `content-encoding`, `content-length`, `host`, `connection`, `transfer-encoding`)"},
	{Name: "header-file", Default: "none", Repeatable: true, read: setter{takes: "`KEY:/path`", set: setHeaderFile},
		Help: "a header whose value is the file's content, trimmed (an API key, `Basic ...`, a vendor token), read again at each reload"},
	{Name: "bearer-token-file", Default: "none", read: text("FILE", func(c *Config) *string { return &c.BearerTokenFile }),
		Help: "`authorization: Bearer` with the token in this file, read again at each reload"},
	{Name: "signals", Default: "every signal", read: setter{takes: "`traces,metrics,logs`", sep: ",", set: func(c *Config, v string) (err error) {
		c.Signals, err = fastpath.ParseSignals(v)
		return err
	}, more: func(c *Config, v string) error {
		s, err := fastpath.ParseSignals(v)
		c.Signals |= s
		return err
	}},
		Help: "the signals the destination takes, separated by commas or `|`; a request of a signal no destination takes is refused ([per-signal destinations](#per-signal-destinations-signals))"},
	{Name: "match-header", Default: "none: the rest", read: setter{takes: "`NAME:VALUE`, `NAME:V1|V2` or `NAME:*`", set: func(c *Config, v string) (err error) {
		c.MatchHeader, err = tenant.ParseMatch(v)
		return err
	}},
		Help: "with `-intake.headers`, the tenants whose batches the destination takes: those whose header `NAME` has one of the values, or any value with `*`; a destination without it takes the tenants no destination with listed values takes ([tenants.md](tenants.md))"},
	{Name: "match", Default: "none: the rest", read: setter{takes: "`resource:KEY=VALUE`, `resource:KEY=PREFIX*` or `resource:KEY=V1|P2*`", set: func(c *Config, v string) (err error) {
		c.Route, err = process.ParseRoute(v)
		return err
	}, named: true},
		Help: "the resources (`ResourceSpans`, `ResourceMetrics`, `ResourceLogs`) whose attribute `KEY` matches; a destination without it takes the resources no destination with a `match` takes; a request whose resources go different ways is split into one piece per set of destinations ([processing.md](processing.md#routing-by-resource-attribute--dest-matchresource))"},
	{Name: "forward-headers", Default: "none", read: list("`NAME|NAME`", strings.ToLower, func(c *Config) *[]string { return &c.ForwardHeaders }),
		Help: "with `-intake.headers`: each batch's tenant values of these headers are sent with it (gRPC metadata, HTTP headers, Kafka record headers); `mode=unary`, `protocol=http` or `protocol=kafka` only ([tenants.md](tenants.md))"},

	{Name: "brokers", Section: DestKeysKafka, Default: "required", read: setter{takes: "`host:port,host:port,...`", sep: ",", set: func(c *Config, v string) error {
		c.Kafka.Brokers = nil
		return addBrokers(c, v)
	}, more: addBrokers},
		Help: "the Kafka brokers the producer bootstraps from, separated by commas or `|`; the others are learnt from them"},
	{Name: "topic", Section: DestKeysKafka, Default: "none", read: text("TOPIC", func(c *Config) *string { return &c.Kafka.Topic }),
		Help: "the topic of every signal whose own key is not given (as the Collector's `topic`)"},
	{Name: "traces-topic", Section: DestKeysKafka, Default: "`otlp_spans` (the Collector's)", read: text("TOPIC", func(c *Config) *string { return &c.Kafka.TracesTopic }),
		Help: "the topic of spans"},
	{Name: "metrics-topic", Section: DestKeysKafka, Default: "`otlp_metrics` (the Collector's)", read: text("TOPIC", func(c *Config) *string { return &c.Kafka.MetricsTopic }),
		Help: "the topic of metrics"},
	{Name: "logs-topic", Section: DestKeysKafka, Default: "`otlp_logs` (the Collector's)", read: text("TOPIC", func(c *Config) *string { return &c.Kafka.LogsTopic }),
		Help: "the topic of log records"},
	{Name: "encoding", Section: DestKeysKafka, Default: "`otlp_proto` (the Collector's)", read: text("`otlp_proto` or `otlp_json`", func(c *Config) *string { return &c.Kafka.Encoding }),
		Help: "a record's value: `otlp_proto`, the bytes of an OTLP `Export*ServiceRequest`, or `otlp_json`, its OTLP/JSON; a Collector's Kafka receiver reads either with the same `encoding`"},
	{Name: "partition", Section: DestKeysKafka, Default: "`round_robin` (no key)", read: text("`round_robin`, `trace_id` or `resource`", func(c *Config) *string { return &c.Kafka.Partition }),
		Help: "`round_robin`: records without a key, spread over the partitions in turn; `trace_id`: spans, and log records, as one record per trace keyed by its trace id in hex, so that every span of a trace lands in one partition, as the Collector's `partition_traces_by_id` and `partition_logs_by_trace_id` (log records without a trace id in a record without a key; metrics are not keyed); `resource`: every signal in records of one resource each, keyed as the Collector's `partition_metrics_by_resource_attributes` and `partition_logs_by_resource_attributes` key them (pdatautil.MapHash of its attributes, 16 bytes; [kafka.md](kafka.md#partitioning)), so that a resource's data lands in one partition"},
	{Name: "max-message-bytes", Section: DestKeysKafka, Default: "`1000000` (the Collector's)", read: size(1<<30, func(c *Config) *int { return &c.Kafka.MaxMessageBytes }),
		Help: "the largest record batch sent; a topic whose `max.message.bytes` is smaller, read from the brokers before the first record, bounds its own. A batch is cut at resource, scope and item boundaries into records below it; an item larger on its own is dropped, counted (`reason=\"too_large\"`)"},
	{Name: "sasl-mechanism", Section: DestKeysKafka, Default: "none", read: text("`plain`, `scram-sha-256` or `scram-sha-512`", func(c *Config) *string { return &c.Kafka.SASLMechanism }),
		Help: "authenticate with SASL, with `sasl-username` and `sasl-password-file`; over TLS (`tls=true` or a `tls-*` key) unless the network is trusted"},
	{Name: "sasl-username", Section: DestKeysKafka, Default: "none", read: text("NAME", func(c *Config) *string { return &c.Kafka.SASLUsername }),
		Help: "the SASL user"},
	{Name: "sasl-password-file", Section: DestKeysKafka, Default: "none", read: setter{takes: "FILE", set: setSASLPasswordFile},
		Help: "a file holding the SASL password, trimmed, read again at each reload"},

	{Name: "resolver", Section: DestKeysFleet, Default: "none", read: text("`static`, `dns` or `file`", func(c *Config) *string { return &c.Resolver }),
		Help: "this `-dest` is a fleet: `static`, the `endpoints`; `dns`, the A and AAAA records of the `endpoint`'s host; `file`, the lines of `endpoints-file`"},
	{Name: "endpoints", Section: DestKeysFleet, Default: "none", read: list("`host:port|host:port|...`", nil, func(c *Config) *[]string { return &c.Endpoints }),
		Help: "`resolver=static`: the backends"},
	{Name: "endpoints-file", Section: DestKeysFleet, Default: "none", read: text("FILE", func(c *Config) *string { return &c.EndpointsFile }),
		Help: "`resolver=file`: one `host:port` per line, `#` comments; re-read when its mtime or size changes and on SIGHUP (a file with a bad line is refused whole and the current set stays)"},
	{Name: "resolve-interval", Section: DestKeysFleet, Default: "`5s`", read: duration(func(c *Config) *time.Duration { return &c.ResolveInterval }),
		Help: "how often DNS is asked again and the file checked"},
	{Name: "balance", Section: DestKeysFleet, Default: "`trace_id`", read: text("`trace_id`, `service` or `resource`", func(c *Config) *string { return &c.Balance }),
		Help: "`trace_id`: spans by trace id, log records by trace id when they have one and by resource otherwise; `service`: every signal by the resource's `service.name`; `resource`: by a hash of the resource's attributes. Metrics always go by resource (or `service.name` with `balance=service`)"},
	{Name: "eject-after", Section: DestKeysFleet, Default: "`30s`", read: duration(func(c *Config) *time.Duration { return &c.EjectAfter }),
		Help: "a backend with requests outstanding and none acknowledged for this long is ejected; 0: never"},
}

// DestKeys returns the table of -dest keys, in the order the reference lists them. Safe for
// concurrent use; the slice is the caller's.
func DestKeys() []DestKey {
	out := make([]DestKey, len(destKeys))
	copy(out, destKeys)
	for i := range out {
		if out[i].Takes == "" {
			out[i].Takes = out[i].read.takes
		}
		out[i].Sep = out[i].read.sep
	}
	return out
}

// destKeyIndex is each key's place in destKeys.
var destKeyIndex = func() map[string]int {
	m := make(map[string]int, len(destKeys))
	for i, k := range destKeys {
		m[k.Name] = i
	}
	return m
}()

// DestKeySet is a set of -dest keys: those a value gives (DestSpec.Given).
type DestKeySet struct{ bits [2]uint64 }

func (s *DestKeySet) add(i int) { s.bits[i/64] |= 1 << (i % 64) }

func (s DestKeySet) has(i int) bool { return s.bits[i/64]&(1<<(i%64)) != 0 }

// Has reports whether the set holds key. A name that is no -dest key panics: it is a typo
// in the caller, which would otherwise never see the key given.
func (s DestKeySet) Has(key string) bool {
	i, ok := destKeyIndex[key]
	if !ok {
		panic(fmt.Sprintf("BUG: %q is not a -dest key", key))
	}
	return s.has(i)
}

// Len is how many keys the set holds.
func (s DestKeySet) Len() int { return bits.OnesCount64(s.bits[0]) + bits.OnesCount64(s.bits[1]) }

// Names returns the keys of the set in the order of the table.
func (s DestKeySet) Names() []string {
	var out []string
	for i, k := range destKeys {
		if s.has(i) {
			out = append(out, k.Name)
		}
	}
	return out
}

func (s DestKeySet) String() string { return strings.Join(s.Names(), ",") }

// unknownKey is the error for a key the table does not hold: with the nearest key when one
// is a slip of the keyboard away, with every key otherwise.
func unknownKey(k string) error {
	best, dist := "", 3 // farther than two edits is no slip
	for _, dk := range destKeys {
		if d := editDistance(k, dk.Name); d < dist {
			best, dist = dk.Name, d
		}
	}
	if best != "" {
		return fmt.Errorf("client: -dest key %q is unknown; did you mean %q?", k, best)
	}
	names := make([]string, len(destKeys))
	for i, dk := range destKeys {
		names[i] = dk.Name
	}
	return fmt.Errorf("client: -dest key %q is unknown; the keys are %s (docs/destinations.md)", k, strings.Join(names, ", "))
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// The setters of the table, by the kind of value they read.

func text(takes string, field func(*Config) *string) setter {
	return setter{takes: takes, set: func(c *Config, v string) error {
		*field(c) = v
		return nil
	}}
}

func integer(field func(*Config) *int) setter {
	return setter{takes: "N", set: func(c *Config, v string) (err error) {
		*field(c), err = strconv.Atoi(v)
		return err
	}}
}

func integer64(field func(*Config) *int64) setter {
	return setter{takes: "N", set: func(c *Config, v string) (err error) {
		*field(c), err = strconv.ParseInt(v, 10, 64)
		return err
	}}
}

// size reads a byte size with an optional unit suffix, at most limit.
func size[T int | int32 | int64](limit int64, field func(*Config) *T) setter {
	return setter{takes: "SIZE", set: func(c *Config, v string) error {
		n, err := parseSize(v, limit)
		*field(c) = T(n)
		return err
	}}
}

func duration(field func(*Config) *time.Duration) setter {
	return setter{takes: "DURATION", set: func(c *Config, v string) (err error) {
		*field(c), err = time.ParseDuration(v)
		return err
	}}
}

func boolean(field func(*Config) *bool) setter {
	return setter{takes: "`true` or `false`", set: func(c *Config, v string) (err error) {
		*field(c), err = strconv.ParseBool(v)
		return err
	}}
}

// list reads items separated by '|', trimmed, each through norm when set; empty ones are
// left out. The value replaces the base's list.
func list(takes string, norm func(string) string, field func(*Config) *[]string) setter {
	return setter{takes: takes, sep: "|", set: func(c *Config, v string) error {
		var out []string
		for s := range strings.SplitSeq(v, "|") {
			if s = strings.TrimSpace(s); norm != nil {
				s = norm(s)
			}
			if s != "" {
				out = append(out, s)
			}
		}
		*field(c) = out
		return nil
	}}
}

func setHeader(c *Config, v string) error {
	hk, hv, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("want key:value")
	}
	c.addHeader(hk, strings.TrimSpace(hv))
	return nil
}

// setHeaderFile reads the file here, through the reader of ${file:PATH}, so that every
// reading of the destinations reads it again: a -dest.file reload replaces a destination whose
// header changed.
func setHeaderFile(c *Config, v string) error {
	hk, path, ok := strings.Cut(v, ":")
	if path = strings.TrimSpace(path); !ok || path == "" {
		return fmt.Errorf("want key:/path/to/file")
	}
	hv, err := credfile.Value(path)
	if err != nil {
		return err
	}
	c.addHeader(hk, hv)
	return nil
}

// addBrokers appends the brokers of v, separated by commas or '|'.
func addBrokers(c *Config, v string) error {
	for b := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == '|' }) {
		if b = strings.TrimSpace(b); b != "" {
			c.Kafka.Brokers = append(c.Kafka.Brokers, b)
		}
	}
	return nil
}

// setSASLPasswordFile reads the file here, as setHeaderFile does, so that a reload that finds
// another password replaces the destination.
func setSASLPasswordFile(c *Config, v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return fmt.Errorf("want a file")
	}
	pw, err := credfile.Value(v)
	if err != nil {
		return err
	}
	c.Kafka.SASLPasswordFile, c.Kafka.password = v, pw
	return nil
}

func (c *Config) addHeader(k, v string) {
	if c.Headers == nil {
		c.Headers = map[string]string{}
	}
	c.Headers[strings.ToLower(strings.TrimSpace(k))] = v
}
