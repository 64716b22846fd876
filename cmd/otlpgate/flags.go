package main

import (
	"flag"
	"fmt"
	"strconv"

	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// usageHeader opens -help, and the answer to an argument that is not a flag.
const usageHeader = `usage: otlpgate [flags]

otlpgate is a telemetry edge proxy. It takes OTLP over gRPC (v1 services and the OTEP unary and
streaming exporters) and over HTTP (protobuf and JSON) and delivers it to the destinations given by -dest, or, with none, to a
local OTLP/JSON file. Sizes accept KiB, MiB, GiB suffixes. Every value may hold ${env:NAME} and
${file:PATH} (the file's content, trimmed); $${ is a literal ${. -check checks a configuration
without starting; -version prints the version.
`

// registerFlags defines every flag on fs, writing into cfg. Each help text names its default
// (printed by -help) and, where it limits something, the metric that counts what it refuses.
func registerFlags(fs *flag.FlagSet, cfg *config) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\nFlags:\n", usageHeader)
		fs.PrintDefaults()
	}
	g := &cfg.grpc
	fs.StringVar(&g.Listen, "grpc.listen", g.Listen, "OTLP/gRPC intake address; empty turns it off")
	fs.Func("grpc.transport", fmt.Sprintf("HTTP/2 transport of the OTLP/gRPC intake: grpc-go, or otlpgate, otlpgate's own, which serves the three v1 Export methods and the OTEP UnaryExporter and StreamExporter (h2c with prior knowledge, or TLS with ALPN h2 under -grpc.tls.*) and answers every other method UNIMPLEMENTED; HTTP/2 errors of its clients are counted in otlpgate_grpc_h2_errors_total (default %s)", g.Transport), func(s string) error {
		switch s {
		case grpcserver.TransportGRPCGo, grpcserver.TransportOwn:
			g.Transport = s
			return nil
		}
		return fmt.Errorf("%q is not %s or %s", s, grpcserver.TransportGRPCGo, grpcserver.TransportOwn)
	})
	fs.Var(intSize{&g.MaxRecvMsgSize}, "grpc.max-recv-msg-size", "largest request accepted; larger ones get RESOURCE_EXHAUSTED")
	fs.Func("grpc.max-concurrent-streams", fmt.Sprintf("HTTP/2 streams per connection (default %d)", g.MaxConcurrentStreams), func(s string) error {
		_, err := fmt.Sscan(s, &g.MaxConcurrentStreams)
		return err
	})
	fs.IntVar(&g.MaxConnections, "grpc.max-connections", g.MaxConnections, "connections open at once; further clients wait in the accept backlog (otlpgate_grpc_connections)")
	fs.IntVar(&g.MaxConnectionsPerPeer, "grpc.max-connections-per-peer", g.MaxConnectionsPerPeer, "connections of one client address at once; more are closed when accepted (0: no cap; otlpgate_grpc_refused_connections_total{reason=\"per_peer\"})")
	fs.DurationVar(&g.HandshakeTimeout, "grpc.handshake-timeout", g.HandshakeTimeout, "bound on a new connection's TLS handshake and HTTP/2 preface")
	fs.Var(intSize{&g.MaxHeaderBytes}, "grpc.max-header-bytes", "largest header list of a call, as decoded; a longer one resets the stream (otlpgate_grpc_refused_streams_total{reason=\"header_too_large\"})")
	fs.DurationVar(&g.RecvTimeout, "grpc.recv-timeout", g.RecvTimeout, "bound on receiving one message, from the call's headers (first message) or its first byte (later ones) to its last byte, while the client may send; past it the connection is closed (otlpgate_grpc_closed_connections_total{reason=\"recv_timeout\"})")
	fs.Var(byteSize{&g.MaxConnRecvBytes}, "grpc.max-conn-recv-bytes", "bytes of unfinished messages one connection may have sent beyond each stream's initial window (-grpc.http2.stream-window) and beyond what its unary calls reserved of -intake.max-conn-bytes (those are never counted: calls past that share are refused one by one with RESOURCE_EXHAUSTED + RetryInfo), at least -grpc.max-recv-msg-size (0: twice -grpc.max-recv-msg-size); past it the connection is closed (otlpgate_grpc_closed_connections_total{reason=\"recv_bytes\"}, otlpgate_grpc_unfinished_bytes)")
	fs.Var(int32Size{&g.InitialWindowSize}, "grpc.http2.stream-window", "HTTP/2 flow-control window per stream")
	fs.Var(int32Size{&g.InitialConnWindowSize}, "grpc.http2.conn-window", "HTTP/2 flow-control window per connection")
	fs.Var(intSize{&g.ReadBufferSize}, "grpc.read-buffer", "read buffer per connection")
	fs.Var(intSize{&g.WriteBufferSize}, "grpc.write-buffer", "write buffer per connection")
	fs.BoolVar(&g.ZeroBuffers, "grpc.zero-buffers", g.ZeroBuffers, "take the buffers HTTP/2 frames are read into from grpc-go's pool, which zeroes each one, instead of otlpgate's byte pool, which does not (gRPC fills them before they are read)")
	fs.Func("grpc.passthrough-encoding", fmt.Sprintf("the grpc-encoding (gzip, zstd or none) whose v1 requests keep the bytes they arrived as, so that with -compression.passthrough a batch of them is sent on without compressing it again; gRPC allows one per server, requests in another are decompressed and compressed again (otlpgate_fastpath_passthrough_requests_total) (default %s)", g.PassThrough), func(s string) error {
		switch s {
		case "none", "":
			g.PassThrough = ""
		case "gzip", "zstd":
			g.PassThrough = s
		default:
			return fmt.Errorf("%q is not gzip, zstd or none", s)
		}
		return nil
	})
	fs.Func("grpc.stream-workers", fmt.Sprintf("goroutines reused to serve calls (0: a new goroutine per call) (default %d)", g.StreamWorkers), func(s string) error {
		_, err := fmt.Sscan(s, &g.StreamWorkers)
		return err
	})
	fs.DurationVar(&g.KeepaliveTime, "grpc.keepalive.time", g.KeepaliveTime, "ping an idle client after this long")
	fs.DurationVar(&g.KeepaliveTimeout, "grpc.keepalive.timeout", g.KeepaliveTimeout, "close a connection whose ping is not answered in this time")
	fs.DurationVar(&g.KeepaliveMinTime, "grpc.keepalive.min-time", g.KeepaliveMinTime, "shortest client ping interval tolerated")
	fs.DurationVar(&g.MaxConnectionIdle, "grpc.max-connection-idle", g.MaxConnectionIdle, "close connections without calls after this long, with a GOAWAY (0: never)")
	fs.DurationVar(&g.MaxConnectionAge, "grpc.max-connection-age", g.MaxConnectionAge, "send GOAWAY to connections this old, so that clients move to a new one (0: never)")
	fs.DurationVar(&g.MaxConnectionAgeGrace, "grpc.max-connection-age-grace", g.MaxConnectionAgeGrace, "after -grpc.max-connection-age, close the connection once this long has passed, calls or not (0: never)")
	fs.DurationVar(&g.StreamMaxAge, "grpc.stream.max-age", g.StreamMaxAge, "end an OTEP stream after this long, idle or once the request it is handling is answered (re-balancing; 0: never; otlpgate_grpc_rebalanced_streams_total)")
	fs.Int64Var(&g.StreamMaxRequests, "grpc.stream.max-requests", g.StreamMaxRequests, "end an OTEP stream after this many requests (0: never)")
	fs.IntVar(&g.StreamWindow, "grpc.stream.window", g.StreamWindow, "requests of one stream awaiting upstream acks at once (-ack=upstream)")
	fs.IntVar(&g.StreamMaxUnsent, "grpc.stream.max-unsent", g.StreamMaxUnsent, "answers of one OTEP stream the client has not taken yet (HTTP/2 window) before the stream stops reading requests (otlpgate_grpc_stream_stalls_total)")
	fs.DurationVar(&g.StreamAnswerTimeout, "grpc.stream.answer-timeout", g.StreamAnswerTimeout, "how long a stalled OTEP stream waits for the client to take an answer before its connection is closed (otlpgate_grpc_closed_connections_total{reason=\"answers_not_taken\"}); with -grpc.transport=otlpgate only the stream is ended, RESOURCE_EXHAUSTED (otlpgate_grpc_stream_answer_timeouts_total)")
	fs.DurationVar(&g.OverloadAfter, "grpc.overload-after", g.OverloadAfter, "refusals lasting this long end calls and streams with UNAVAILABLE + RetryInfo (otlpgate_grpc_overload_terminations_total)")
	fs.StringVar(&cfg.scanDepth, "grpc.scan-depth", cfg.scanDepth, "request validation depth of both network intakes: full refuses each request the OpenTelemetry Collector's decoder would refuse (ids of the wrong length, wrong wire types, ...) and strings that are not UTF-8; resource and top check less: a malformed request they let through joins a batch shared with other clients, and an upstream that validates (a Collector) refuses that whole batch, losing every client's data in it (otlpgate_grpc_refused_requests_total{reason=\"invalid\"}, otlpgate_http_refused_requests_total{reason=\"invalid\"})")
	fs.StringVar(&g.TLSCert, "grpc.tls.cert", "", "server certificate file (PEM); turns TLS on")
	fs.StringVar(&g.TLSKey, "grpc.tls.key", "", "server key file (PEM)")
	fs.StringVar(&g.TLSClientCA, "grpc.tls.client-ca", "", "CA file for client certificates; turns mutual TLS on")
	fs.StringVar(&g.AuthTokenFile, "grpc.auth.token-file", "", "file holding a bearer token every gRPC call must present (default: -auth.token-file)")
	fs.StringVar(&cfg.authToken, "auth.token-file", "", "file holding a bearer token every gRPC call and HTTP request must present, unless -grpc.auth.token-file or -http.auth.token-file names another")

	h := &cfg.http
	fs.StringVar(&h.Listen, "http.listen", h.Listen, "OTLP/HTTP intake address (HTTP/1.1); empty turns it off")
	fs.StringVar(&h.TracesPath, "http.traces-path", h.TracesPath, "path of trace export requests")
	fs.StringVar(&h.MetricsPath, "http.metrics-path", h.MetricsPath, "path of metric export requests")
	fs.StringVar(&h.LogsPath, "http.logs-path", h.LogsPath, "path of log export requests")
	fs.Var(intSize{&h.MaxRequestBytes}, "http.max-request-bytes", "largest request body, on the wire and after decompression; larger ones get 413 (otlpgate_http_rejected_requests_total{reason=\"body_too_large\"})")
	fs.Var(intSize{&h.MaxHeaderBytes}, "http.max-header-bytes", "largest request line and headers; larger ones get 431 (otlpgate_http_rejected_requests_total{reason=\"bad_header\"})")
	fs.IntVar(&h.MaxConnections, "http.max-connections", h.MaxConnections, "connections open at once; further clients wait in the accept backlog")
	fs.DurationVar(&h.ReadTimeout, "http.read-timeout", h.ReadTimeout, "bound on receiving one request, headers and body")
	fs.DurationVar(&h.WriteTimeout, "http.write-timeout", h.WriteTimeout, "bound on writing one response")
	fs.DurationVar(&h.IdleTimeout, "http.idle-timeout", h.IdleTimeout, "close keep-alive connections idle this long")
	fs.DurationVar(&h.OverloadAfter, "http.overload-after", h.OverloadAfter, "refusals lasting this long turn 429 answers into 503 (otlpgate_http_overload_responses_total)")
	fs.StringVar(&h.TLSCert, "http.tls.cert", "", "server certificate file (PEM); turns TLS on")
	fs.StringVar(&h.TLSKey, "http.tls.key", "", "server key file (PEM)")
	fs.StringVar(&h.TLSClientCA, "http.tls.client-ca", "", "CA file for client certificates; turns mutual TLS on")
	fs.StringVar(&h.AuthTokenFile, "http.auth.token-file", "", "file holding a bearer token every HTTP request must present (default: -auth.token-file)")
	fs.StringVar(&cfg.corsOrig, "http.cors.allowed-origins", "", "comma-separated origins browsers may send from: exact, with one * (https://*.example.com), or *; empty turns CORS off (otlpgate_http_rejected_requests_total{reason=\"cors_refused\"})")
	fs.StringVar(&cfg.corsHdrs, "http.cors.allowed-headers", "", "comma-separated request headers allowed beyond Content-Type and Content-Encoding; * for any")
	fs.DurationVar(&h.CORSMaxAge, "http.cors.max-age", h.CORSMaxAge, "how long browsers may cache a preflight answer (0: no Access-Control-Max-Age)")

	p := &cfg.pipeline
	fs.Var(byteSize{&p.QueueMaxBytes}, "queue.max-bytes", "bytes admitted and not yet delivered by every destination; past it requests are refused (otlpgate_fastpath_refused_items_total{reason=\"queue_full\"})")
	fs.Var(intSize{&p.BatchMaxBytes}, "batch.max-bytes", "seal a batch before it grows past this size")
	fs.IntVar(&p.BatchMaxItems, "batch.max-items", p.BatchMaxItems, "seal a batch once it holds this many spans, points or log records")
	fs.DurationVar(&p.BatchMaxAge, "batch.max-age", p.BatchMaxAge, "seal a batch this long after its first request at the latest")
	fs.BoolVar(&p.Eager, "batch.eager", p.Eager, "group commit: seal a batch at once when the destinations hold no sealed batch, else when they finish the last one they hold (or at the size, item or age limit): batches grow only while the destinations are busy")
	fs.Var(givenDuration{&p.BatchMinGap, &cfg.minGapGiven}, "batch.min-gap", "with -batch.eager, keep a signal's batches at least this `duration` apart while requests keep coming, so that they share upstream requests: about this much added delivery latency, never more than -batch.max-age after a batch's first request; with -ack=upstream, where each answer waits for delivery, the default is 1ms; 0: off")
	fs.BoolVar(&p.PassThrough, "compression.passthrough", p.PassThrough, "a protobuf request that arrived gzip- or zstd-compressed over OTLP/HTTP (or over gRPC v1 in -grpc.passthrough-encoding) joins a batch as received, when every destination that takes it sends that compression (protocol http or v1) and nothing rewrites it (no processing step or resource route; tenants pass through, each in batches of its own; with -spool.dir it is spooled as received): the batch is the concatenation of the compressed requests, sent without compressing again (otlpgate_fastpath_passthrough_requests_total{way=\"compressed\"}, otlpgate_fastpath_passthrough_batches_total, otlpgate_fastpath_passthrough_fallback_requests_total)")
	fs.StringVar(&cfg.ack, "ack", cfg.ack, "acknowledge requests once admitted (accept) or once every destination's upstream acknowledged them (upstream)")
	fs.Var(multiFlag{&cfg.dests}, "dest", "an upstream destination, repeatable: 'name=be,endpoint=host:4317,...' speaks standard OTLP/gRPC (protocol=v1, unary), 'name=be,endpoint=https://host:4318,...' OTLP/HTTP (protocol=http), 'name=gw,endpoint=host:4317,protocol=otep,...' otlpgate's own pipelined streams, which only an otlpgate serves; an upstream that answers UNIMPLEMENTED or 404 does not serve what it is sent: its data is kept and the destination shown down (otlpgate_client_unserved_signals); match=resource:KEY=VALUE (or PREFIX*, or V1|V2) gives the destination only the resources whose attribute matches, a destination without match= the rest, splitting a request whose resources go different ways (otlpgate_route_split_requests_total; resources no destination takes: otlpgate_route_unrouted_resources_total); signals=traces,logs (default: traces,metrics,logs) gives it only those signals, and a request of a signal no destination takes is refused (gRPC UNIMPLEMENTED, HTTP 404; otlpgate_fastpath_refused_items_total{reason=\"unserved\"})")
	fs.StringVar(&cfg.destFile, "dest.file", "", "file of more destinations, one -dest value a line (# starts a comment line); on SIGHUP and on a change the difference is applied while otlpgate runs: new destinations start, removed ones drain, changed ones are replaced, unchanged ones keep running (a new queue-bytes, set or derived, is applied in place); an invalid file keeps the running set (otlpgate_config_reloads_total, otlpgate_config_reload_failures_total)")
	fs.DurationVar(&cfg.destFilePoll, "dest.file.poll-interval", cfg.destFilePoll, "how often -dest.file is read for a change (0: only on SIGHUP)")
	fs.DurationVar(&cfg.secretsPoll, "secrets.poll-interval", cfg.secretsPoll, "how often the files a reload reads again (a -dest header-file or bearer-token-file, a ${file:PATH} in -dest.file, -auth.tenants-file) are read for a change; a change reloads as SIGHUP does, so a rotated Kubernetes Secret is sent without a signal (0: only on SIGHUP)")
	fs.IntVar(&cfg.destFileMax, "dest.file.max-destinations", cfg.destFileMax, "destinations -dest.file may hold; a file with more stops otlpgate at start and is refused at a reload, keeping the running set (otlpgate_config_reload_failures_total); an idle destination costs tens of goroutines and 150-220KB of heap (docs/destinations.md)")

	fs.Var(multiFlag{&cfg.procSet}, "resource.set", "upsert a string attribute into every resource of every signal from every intake, repeatable: key=value; ${env:NAME} in the value reads the environment at start, as in every flag value (a variable not set is an error); an attribute with the same key is replaced (otlpgate_process_edited_resources_total)")
	fs.Var(multiFlag{&cfg.procDelete}, "resource.delete", "remove a resource attribute by key from every resource of every signal, repeatable (otlpgate_process_edited_resources_total)")
	fs.StringVar(&cfg.proc.FromPeer, "resource.from-peer", "", "set this resource attribute (client.address, k8s.pod.ip, ...) to the IP address the request's connection came from, a string, on every resource of every request from the OTLP/gRPC, OTLP/HTTP and Kafka intakes (the OpenCensus unix socket has no address: its resources are left as they are), so that a gateway behind otlpgate can associate telemetry with its source (k8sattributes' pod_association from resource_attribute); -resource.from-peer.action says what a resource that has the attribute keeps; empty (the default) sets none (otlpgate_process_edited_resources_total)")
	fs.StringVar(&cfg.peerAction, "resource.from-peer.action", "insert", "what -resource.from-peer does to a resource that carries its attribute already, as the Collector's resource processor actions: insert keeps a value the resource has (an empty string counts as none, as k8sattributes sets k8s.pod.ip), upsert replaces it, so that no client can claim another's address")
	fs.Var(multiFlag{&cfg.procDrop}, "drop", "leave out every resource (with its spans, points or log records) whose string attribute matches, repeatable: 'resource:KEY=VALUE' (exact) or 'resource:KEY=PREFIX*'; the client is answered Success (otlpgate_process_dropped_items_total, otlpgate_process_dropped_resources_total)")
	fs.StringVar(&cfg.sampleTraces, "sample.traces", "", "keep this percentage of traces (0 to 100) by trace id, deciding each span as the Collector-contrib probabilistic_sampler does in the -sample.mode given, with fail_closed; empty (the default) turns sampling off (otlpgate_process_sampled_out_spans_total, otlpgate_process_sampled_kept_spans_total)")
	fs.StringVar(&cfg.sampleMode, "sample.mode", cfg.sampleMode, "how -sample.traces decides, as the Collector's probabilistic_sampler modes: hash_seed (an FNV hash of the trace id and -sample.hash-seed; tracestate left as it came), proportional (OTEP 235: the trace id's randomness against a threshold that multiplies the probability a span arrived with, written into its tracestate as ot=th:...) or equalizing (OTEP 235: a fixed threshold, or the stricter one a span arrived with); in both, tracestate values that leave no room for the threshold within 1024 bytes are left out and counted in otlpgate_process_tracestate_values_omitted_total")
	fs.Func("sample.hash-seed", "seed of the trace id hash of -sample.mode=hash_seed, the Collector's hash_seed: tiers that must agree use the same seed (default 0)", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("want an unsigned 32-bit integer")
		}
		cfg.sampleSeed, cfg.sampleSeedSet = uint32(n), true
		return nil
	})
	fs.Func("sample.precision", "significant hex digits (1 to 14) of the thresholds -sample.mode=proportional and equalizing write into tracestate, the Collector's sampling_precision (default 4)", func(s string) error {
		cfg.samplePrecision, cfg.samplePrecisionSet = s, true // read by finishProcessConfig, which knows the mode
		return nil
	})
	fs.BoolVar(&cfg.sampleLogs, "sample.logs", false, "apply the -sample.traces decision to log records by their trace id, so that the logs of a dropped trace are dropped with it; log records without a trace id are kept (otlpgate_process_sampled_out_log_records_total, otlpgate_process_sampled_kept_log_records_total)")

	sp := &cfg.spool
	fs.StringVar(&sp.Dir, "spool.dir", sp.Dir, "directory of the durable spool: every request is appended there before it is acknowledged and the destinations are fed from it, so that what was acknowledged survives kill -9, restarts and long outages; empty (the default) turns it off (otlpgate_spool_bytes, otlpgate_spool_appended_records_total)")
	fs.StringVar(&cfg.spoolSync, "spool.sync", cfg.spoolSync, "when a spooled request is acknowledged: always (after fdatasync, shared by concurrent requests), interval (after write(2), synced every -spool.sync-interval) or none (after write(2): survives kill -9, not a power loss) (otlpgate_spool_fsyncs_total, otlpgate_spool_fsync_seconds)")
	fs.DurationVar(&sp.SyncInterval, "spool.sync-interval", sp.SyncInterval, "period of the spool's background syncs with -spool.sync=interval: the most a power loss can take (otlpgate_spool_fsyncs_total)")
	fs.DurationVar(&sp.MaxCommitDelay, "spool.max-commit-delay", sp.MaxCommitDelay, "with -spool.sync=always, how long a commit may wait for more requests to share its fsync (0: only while an fsync runs) (otlpgate_spool_commit_records)")
	fs.Var(byteSize{&sp.SegmentBytes}, "spool.segment-bytes", "size of a spool segment file; a segment is deleted once every destination finished it (otlpgate_spool_segments)")
	fs.Var(byteSize{&sp.MaxBytes}, "spool.max-bytes", "disk the spool may use; past it -spool.full decides (otlpgate_spool_append_errors_total{reason=\"full\"}, otlpgate_fastpath_refused_items_total{reason=\"spool_full\"})")
	fs.StringVar(&cfg.spoolFull, "spool.full", cfg.spoolFull, "when the spool is full: refuse (backpressure to clients: 429, RESOURCE_EXHAUSTED, FailedRetryable) or drop-oldest (oldest segments deleted, otlpgate_spool_dropped_records_total{reason=\"drop_oldest\"})")
	fs.DurationVar(&sp.CheckpointInterval, "spool.checkpoint-interval", sp.CheckpointInterval, "how often the destinations' spool positions are persisted and finished segments deleted: a crash replays at most this much delivered data (otlpgate_spool_replayed_records_total)")
	fs.BoolVar(&cfg.spoolGroupReadable, "spool.group-readable", cfg.spoolGroupReadable, "create the spool's files 0640 and its directory 0750, so that the group may read them (default false: 0600 and 0700, the owner only, whatever the umask; an existing directory keeps its mode)")
	fs.DurationVar(&sp.RemovedHold, "spool.removed-hold", sp.RemovedHold, "how long a destination a -dest.file reload removed keeps the spooled records it still owes, should a reload bring it back; past it they are dropped and logged with its name (otlpgate_spool_dropped_records_total{reason=\"removed\"}); one that owes nothing lets go of the spool at once (default 1h)")
	fs.Var(byteSize{&sp.RemovedHoldBytes}, "spool.removed-hold-bytes", "the most a removed destination may hold of the spool (the segments from its oldest unfinished record to the end), past which it lets go as past -spool.removed-hold (otlpgate_spool_dropped_records_total{reason=\"removed\"}); 0 (the default): half of -spool.max-bytes")
	fs.Var(byteSize{&sp.TailBytes}, "spool.tail-bytes", "memory kept of the newest spooled records (default 1MiB, held on top of -queue.max-bytes), so that destinations that keep up take them from memory instead of reading the segment file back; 0 always reads the file (otlpgate_spool_reads_total{source=\"memory\"} and {source=\"disk\"})")

	in := &cfg.intake
	fs.Var(byteSize{&in.MaxBytes}, "intake.max-bytes", "bytes the gRPC and OTLP/HTTP intakes together hold before admission: each gRPC call being received reserves -grpc.max-recv-msg-size; an OTLP/HTTP body takes bytes as it arrives and as it is decompressed (at least twice -http.max-request-bytes); past it gRPC answers RESOURCE_EXHAUSTED + RetryInfo, HTTP 429 + Retry-After (otlpgate_intake_refused_total{resource=\"bytes\"}, otlpgate_intake_bytes_in_flight, otlpgate_intake_budget_bytes_in_flight{budget=\"grpc_http\"})")
	fs.Var(byteSize{&in.UnauthenticatedMaxBytes}, "intake.unauthenticated.max-bytes", "bytes Kafka and UDS, which cannot authenticate their clients, hold before admission, apart from -intake.max-bytes: Kafka requests as they arrive and pushes as they are decompressed (at least -kafka.max-request-bytes plus -kafka.telemetry-max-bytes), UDS partial messages; past it Kafka answers THROTTLING_QUOTA_EXCEEDED, UDS discards (otlpgate_intake_refused_total{intake=\"kafka\"|\"uds\",resource=\"bytes\"}, otlpgate_intake_budget_bytes_in_flight{budget=\"kafka_uds\"})")
	fs.Var(byteSize{&in.InflateMaxBytes}, "intake.inflate-bytes", "bytes gRPC messages are decompressed into at once, apart from -intake.max-bytes: each compressed message past 64KiB claims -grpc.max-recv-msg-size before it inflates and waits for room (otlpgate_intake_budget_bytes_in_flight{budget=\"grpc_inflate\"}, otlpgate_intake_refused_total{resource=\"inflate_bytes\"})")
	fs.Var(byteSize{&in.MaxConnBytes}, "intake.max-conn-bytes", "what the calls of one gRPC connection hold together of -intake.max-bytes, at least -grpc.max-recv-msg-size; further calls wait, then get RESOURCE_EXHAUSTED + RetryInfo (otlpgate_intake_refused_total{resource=\"conn_bytes\"})")
	fs.DurationVar(&in.ProgressTimeout, "intake.progress-timeout", in.ProgressTimeout, "a gRPC connection one of whose calls held intake bytes this long while the connection received less than 16KiB meanwhile is closed, and its bytes return (0: never; otlpgate_intake_refused_total{resource=\"stalled\"}); the other intakes hold only bytes that arrived, for at most their read timeouts")
	fs.IntVar(&in.MaxDecodes, "intake.max-decodes", in.MaxDecodes, "Kafka pushes decompressed and decoded at once (0: twice GOMAXPROCS; otlpgate_intake_refused_total{resource=\"decodes\"})")
	fs.DurationVar(&in.Wait, "intake.wait", in.Wait, "how long a gRPC call, OTLP/HTTP request or Kafka request waits for the intake limiter before it is refused; also the retry delay it is told")

	tn := &cfg.tenants
	fs.StringVar(&cfg.tenantHeaders, "intake.headers", cfg.tenantHeaders, "tenant headers, comma-separated (e.g. x-scope-orgid): read from each gRPC call's metadata and OTLP/HTTP request's headers, carried with the request through admission and the spool; a batch holds one tenant's requests, destinations select tenants with match-header and send them with forward-headers (see docs/tenants.md); empty (the default) turns tenants off")
	fs.StringVar(&tn.Default, "intake.headers.default", tn.Default, "the value of a tenant header a request does not carry (or carries empty); UDS and Kafka requests have it for every header (default empty)")
	fs.IntVar(&tn.Max, "intake.max-tenants", tn.Max, "distinct tenant values (tuples of -intake.headers) kept at once; a request with a new one past it is refused until a tenant has been idle for -intake.tenant-idle: gRPC RESOURCE_EXHAUSTED without RetryInfo, HTTP 403 (otlpgate_tenant_refused_requests_total{reason=\"max_tenants\"}, otlpgate_tenants)")
	fs.IntVar(&tn.MaxPerPeer, "intake.max-tenants-per-peer", tn.MaxPerPeer, "distinct tenant values one client address (an IPv6 one by its /64) may have brought into the table and that are still in it, so that one client cannot take every place under -intake.max-tenants; a request with a new one past it is refused like one past -intake.max-tenants, while known tenants are served to anyone; raise it, or 0 for no bound, behind a proxy or for a Collector that forwards many tenants (otlpgate_tenant_refused_requests_total{reason=\"per_peer\"})")
	fs.StringVar(&cfg.tenantsFile, "auth.tenants-file", "", "file binding bearer tokens to tenants, one a line: the token, white space, and its tenant's value (with several -intake.headers, NAME=VALUE pairs separated by ','); a gRPC call or HTTP request is then its token's tenant, never what its headers claim: one without a known token is refused (gRPC UNAUTHENTICATED, HTTP 401), one whose tenant headers name another value is refused (PERMISSION_DENIED, 403); re-read on SIGHUP; replaces -auth.token-file (otlpgate_tenant_refused_requests_total{reason=\"credential\"|\"claim_mismatch\"}, otlpgate_tenant_credentials, otlpgate_tenants_file_reloads_total)")
	fs.DurationVar(&tn.Idle, "intake.tenant-idle", tn.Idle, "a tenant without a request and without an open batch for this long leaves the table and frees its place under -intake.max-tenants; coming back, it is a new tenant with a full -tenant.rate bucket (0: tenants are kept until restart; otlpgate_tenants_expired_total, otlpgate_tenants)")

	fs.StringVar(&cfg.tenantRate, "tenant.rate", cfg.tenantRate, "rate each tenant (-intake.headers) may send at over gRPC and OTLP/HTTP, in bytes or items (spans, points, log records) per second: 10MiB/s, 5000items/s; a request over it is refused with HTTP 429 + Retry-After, gRPC RESOURCE_EXHAUSTED + RetryInfo, OTEP FailedRetryable with retry_delay_ms, while other tenants are served; empty (the default) limits nothing (otlpgate_tenant_throttled_requests_total, otlpgate_grpc_refused_requests_total{reason=\"tenant_rate\"}, otlpgate_http_refused_requests_total{reason=\"tenant_rate\"})")
	fs.StringVar(&cfg.tenantBurst, "tenant.burst", cfg.tenantBurst, "what a tenant may send at once over -tenant.rate, in its unit: 20MiB, 10000items (default one second of -tenant.rate)")
	fs.IntVar(&tn.MetricsTop, "tenant.metrics.top", tn.MetricsTop, "tenants with series of their own in the per-tenant counters, the first seen since start; later ones are summed under tenant=\"_other\" (otlpgate_tenant_admitted_items_total, otlpgate_tenant_admitted_bytes_total, otlpgate_tenant_throttled_requests_total)")

	f := &cfg.file
	fs.StringVar(&f.Path, "file.path", f.Path, "OTLP/JSON lines file written when no -dest is given, by the destination named file; a -dest protocol=file,path= writes its own, with the other -file.* settings")
	fs.Var(byteSize{&f.MaxBytes}, "file.max-bytes", "rotate the file before it grows past this size")
	fs.IntVar(&f.MaxBackups, "file.max-backups", f.MaxBackups, "rotated files kept (path.1 is the newest)")
	fs.Var(byteSize{&f.QueueBytes}, "file.queue-bytes", "batches waiting to be written; past it they are dropped (otlpgate_fastpath_destination_refused_batches_total{destination=\"file\"})")
	fs.DurationVar(&f.SummaryInterval, "file.summary-interval", f.SummaryInterval, "log a one-line summary this often while batches are written; an idle file destination logs none (0: never)")
	fs.BoolVar(&f.GroupReadable, "file.group-readable", f.GroupReadable, "create the file and its rotations 0640 and their directory 0750, so that the group may read them (default false: 0600 and 0700, the owner only, whatever the umask; existing ones keep their mode)")

	k := &cfg.kafka
	fs.StringVar(&k.Listen, "kafka.listen", k.Listen, "Kafka KIP-714 client telemetry listener, e.g. 127.0.0.1:9093; empty turns it off")
	fs.StringVar(&k.AdvertisedAddress, "kafka.advertised-address", k.AdvertisedAddress, "host:port listed as the only broker in Metadata (default: the address each client connected to)")
	fs.Var(intSize{&k.MaxRequestBytes}, "kafka.max-request-bytes", "largest Kafka request; larger ones close the connection (otlpgate_kafka_bad_requests_total{reason=\"too_large\"})")
	fs.DurationVar(&k.IdleTimeout, "kafka.idle-timeout", k.IdleTimeout, "close Kafka connections idle this long; every push interval must be shorter")
	fs.DurationVar(&k.ReadTimeout, "kafka.read-timeout", k.ReadTimeout, "bound on receiving one Kafka request once its first byte arrived (otlpgate_kafka_timeouts_total{kind=\"read\"})")
	fs.DurationVar(&k.WriteTimeout, "kafka.write-timeout", k.WriteTimeout, "bound on writing one Kafka response")
	fs.IntVar(&k.MaxConnections, "kafka.max-connections", k.MaxConnections, "Kafka connections at once; more are closed (otlpgate_kafka_rejected_connections_total)")
	fs.IntVar(&k.MaxInstances, "kafka.max-instances", k.MaxInstances, "client instances remembered; the least recently seen is evicted past it (otlpgate_kafka_instances_removed_total{reason=\"evicted\"})")
	fs.Var(byteSize{&k.MaxInstanceBytes}, "kafka.max-instance-bytes", "memory of the client instances remembered (labels, attributes, plans, as estimated); the least recently seen are evicted past it (otlpgate_kafka_instance_bytes, otlpgate_kafka_instances_removed_total{reason=\"evicted\"})")
	fs.IntVar(&k.MaxClientIDBytes, "kafka.max-client-id-bytes", k.MaxClientIDBytes, "longest client id a Kafka client is labelled with; telemetry requests with a longer one get INVALID_REQUEST (otlpgate_kafka_oversized_labels_total{label=\"client_id\"})")
	fs.IntVar(&k.MaxSoftwareBytes, "kafka.max-software-bytes", k.MaxSoftwareBytes, "longest client software name or version (ApiVersions v3+); longer ones get INVALID_REQUEST (otlpgate_kafka_oversized_labels_total{label=~\"client_software_.*\"})")
	fs.StringVar(&k.TLSCert, "kafka.tls.cert", "", "server certificate file (PEM); turns TLS on for the Kafka listener (otlpgate_kafka_tls_handshake_errors_total)")
	fs.StringVar(&k.TLSKey, "kafka.tls.key", "", "server key file (PEM)")
	fs.StringVar(&k.TLSClientCA, "kafka.tls.client-ca", "", "CA file for client certificates; turns mutual TLS on: the Kafka listener has no other authentication")
	fs.StringVar(&k.SubscriptionsFile, "kafka.subscriptions", k.SubscriptionsFile, "YAML or JSON subscriptions file, re-read on SIGHUP")
	fs.StringVar(&cfg.kafkaMets, "kafka.default-metrics", cfg.kafkaMets, "comma-separated metric name prefixes of the default subscription (\"*\": all; empty: no default subscription)")
	fs.DurationVar(&k.DefaultInterval, "kafka.default-interval", k.DefaultInterval, "push interval of the default subscription (100ms to 1h)")
	fs.Var(intSize{&k.TelemetryMaxBytes}, "kafka.telemetry-max-bytes", "largest push, compressed or not; larger ones get TELEMETRY_TOO_LARGE")
	fs.BoolVar(&k.DeltaTemporality, "kafka.delta-temporality", k.DeltaTemporality, "ask clients for delta temporality")

	c := &cfg.consume
	fs.StringVar(&cfg.consumeBrokers, "kafka.consume.brokers", "", "comma-separated host:port of the Kafka brokers the consumer intake reads OTLP records from as a member of -kafka.consume.group; empty turns it off. A partition's offset is committed only once every record before it was delivered by every destination (or spooled with -spool.dir), so a crash loses nothing and re-reads at most what was in flight (docs/kafka.md)")
	fs.StringVar(&cfg.consumeTopics, "kafka.consume.topics", "", "comma-separated TOPIC[:SIGNAL[:ENCODING]] the consumer intake reads: SIGNAL traces, metrics or logs (optional for the Collector's default topics otlp_spans, otlp_metrics, otlp_logs), ENCODING otlp_proto or otlp_json, else -kafka.consume.encoding's")
	fs.StringVar(&c.Group, "kafka.consume.group", c.Group, "consumer group of the consumer intake; members of one group share the partitions (cooperative sticky rebalancing)")
	fs.StringVar(&cfg.consumeEncoding, "kafka.consume.encoding", cfg.consumeEncoding, "encoding of the records of topics that name none: otlp_proto (an Export*ServiceRequest, the Collector's default) or otlp_json")
	fs.Var(intSize{&c.MaxRecordBytes}, "kafka.consume.max-record-bytes", "largest record value the consumer intake admits (an otlp_json record's protobuf form: four times it, charged to -intake.max-bytes while it is built and admitted); larger ones are skipped (otlpgate_kafka_consume_skipped_records_total{reason=\"too_large\"})")
	fs.Var(intSize{&c.MaxBatchBytes}, "kafka.consume.max-batch-bytes", "largest size a fetched record batch may decompress to, checked by the client before any record in it is read: a compressed batch past it is skipped whole, its offsets committed past (otlpgate_kafka_consume_skipped_records_total{reason=\"batch_too_large\"}); at least -kafka.consume.max-record-bytes, at most 2GiB-1. The default is twice -kafka.consume.max-record-bytes' default: a batch of one record of the largest size admitted fits with its framing, and producers' batches of many records are far smaller (1MB in franz-go and sarama, 16KiB in the Java client); without it a few KiB of compressed zeros could cost the client's own bound, 1GiB, per partition fetched")
	fs.Var(intSize{&c.MaxBufferedBytes}, "kafka.consume.max-buffered-bytes", "most the consumer intake's Kafka client holds of fetched records, decompressed, before they are taken: a compressed batch met past it is not decompressed then but fetched again once they are (otlpgate_kafka_consume_deferred_batches_total), so that a fetch of many small compressed batches each under -kafka.consume.max-batch-bytes cannot decompress to many GiB; the client can pass it by one batch per broker it reads from at once, and reads a batch whatever its size when it holds nothing; at least 1KiB")
	fs.IntVar(&c.MaxPollRecords, "kafka.consume.max-poll-records", c.MaxPollRecords, "records the consumer intake takes from its client at once")
	fs.Var(int32Size{&c.FetchMaxBytes}, "kafka.consume.fetch-max-bytes", "bytes one fetch brings from the brokers, and so what the consumer buffers while admission waits")
	fs.Float64Var(&c.QueueShare, "kafka.consume.queue-share", c.QueueShare, "share of the queue (-queue.max-bytes, or -spool.max-bytes with a spool) the consumer intake fills: past it the consumer waits as for a full queue and Kafka keeps the backlog, so that the other intakes, whose clients cannot wait, find room and /readyz (which fails at 90%) stays true while the consumer catches up; (0, 1] (otlpgate_kafka_consume_backpressure_waits_total)")
	fs.DurationVar(&c.CommitInterval, "kafka.consume.commit-interval", c.CommitInterval, "how often the consumer intake commits the offsets of the records delivered (otlpgate_kafka_consume_commits_total)")
	fs.DurationVar(&c.RevokeWait, "kafka.consume.revoke-wait", c.RevokeWait, "how long a partition the group takes away waits for its records in flight before its offset is committed; the new owner reads the rest again")
	fs.DurationVar(&c.SessionTimeout, "kafka.consume.session-timeout", c.SessionTimeout, "consumer group session timeout: a member silent this long loses its partitions")
	fs.DurationVar(&c.StallTimeout, "kafka.consume.stall-timeout", c.StallTimeout, "how long a partition the consumer intake reads may make no progress, outside waits for room, while the brokers hold records past it (or its leader does not answer its end offset), before it is logged and counted in otlpgate_kafka_consume_stalled_partitions; the partitions' end offsets, which otlpgate_kafka_consume_lag uses too, are listed every third of it")
	fs.BoolVar(&c.TenantFromHeaders, "kafka.consume.tenant-from-headers", c.TenantFromHeaders, "read a record's tenant from its Kafka headers named by -intake.headers (compared without case), as the network intakes read request headers; without it records are the default tenant's (refused ones: otlpgate_kafka_consume_skipped_records_total{reason=\"tenant\"})")
	fs.BoolVar(&cfg.consumeTLSOn, "kafka.consume.tls", false, "connect to the brokers over TLS with the system roots (any -kafka.consume.tls.* flag turns TLS on too)")
	fs.StringVar(&cfg.consumeTLS.CAFile, "kafka.consume.tls.ca", "", "CA file (PEM) the brokers' certificates are checked against instead of the system roots")
	fs.StringVar(&cfg.consumeTLS.CertFile, "kafka.consume.tls.cert", "", "client certificate file (PEM) for brokers that ask for one")
	fs.StringVar(&cfg.consumeTLS.KeyFile, "kafka.consume.tls.key", "", "client key file (PEM)")
	fs.StringVar(&cfg.consumeTLS.ServerName, "kafka.consume.tls.server-name", "", "name checked against the brokers' certificates instead of their host names")
	fs.StringVar(&c.SASLMechanism, "kafka.consume.sasl.mechanism", "", "SASL mechanism the consumer authenticates with: plain, scram-sha-256 or scram-sha-512 (over TLS unless the network is trusted)")
	fs.StringVar(&c.SASLUser, "kafka.consume.sasl.username", "", "SASL user name")
	fs.StringVar(&cfg.consumeSASLPasswordFile, "kafka.consume.sasl.password-file", "", "file holding the SASL password")

	u := &cfg.uds
	fs.StringVar(&u.Listen, "uds.listen", u.Listen, "OpenCensus daemon unix socket (where OpenCensus PHP looks); empty turns it off")
	fs.StringVar(&cfg.udsMode, "uds.mode", cfg.udsMode, "permissions of the socket file, octal")
	fs.StringVar(&u.Engine, "uds.engine", u.Engine, "what serves the socket: gnet (event loops) or net (a goroutine per connection on Go's network poller: several times cheaper below a few hundred messages a second, 5-10% dearer at saturation)")
	fs.IntVar(&u.Loops, "uds.loops", u.Loops, "gnet event loops serving the socket (-uds.engine=gnet)")
	fs.Var(intSize{&u.MaxMessageBytes}, "uds.max-message-bytes", "largest daemon message; larger ones are discarded (otlpgate_uds_discarded_messages_total)")
	fs.IntVar(&u.MaxSeries, "uds.max-series", u.MaxSeries, "tag sets per view; more fold into an overflow series (otlpgate_uds_series_overflow_total)")
	fs.IntVar(&u.MaxSeriesTotal, "uds.max-series-total", u.MaxSeriesTotal, "tag sets of all views of all processes together; more fold into their view's overflow series (otlpgate_uds_series_total_overflow_total)")
	fs.IntVar(&u.MaxProcesses, "uds.max-processes", u.MaxProcesses, "PHP processes tracked at once")
	fs.IntVar(&u.MaxMeasures, "uds.max-measures", u.MaxMeasures, "measures per process")
	fs.IntVar(&u.MaxViews, "uds.max-views", u.MaxViews, "views per process")
	fs.IntVar(&u.MaxStringBytes, "uds.max-string-bytes", u.MaxStringBytes, "longest name, description, unit, tag key, tag value or attachment the OpenCensus intake keeps; longer definitions and records are refused (otlpgate_uds_stats_rejected_total{reason=\"too_long\"})")
	fs.IntVar(&u.MaxConnections, "uds.max-connections", u.MaxConnections, "socket connections at once")
	fs.DurationVar(&u.IdleTimeout, "uds.idle-timeout", u.IdleTimeout, "close socket connections that send nothing this long; 0 disables (otlpgate_uds_timeouts_total{kind=\"idle\"})")
	fs.DurationVar(&u.ReadTimeout, "uds.read-timeout", u.ReadTimeout, "close a socket connection that leaves a message unfinished this long, discarding it; 0 disables (otlpgate_uds_timeouts_total{kind=\"read\"})")
	fs.StringVar(&u.Group, "uds.group", u.Group, "group, by name or gid, given the socket file at start; empty keeps the process's group")
	fs.StringVar(&u.ServiceName, "uds.service-name", u.ServiceName, "service.name resource attribute of what arrives on the socket")
	fs.DurationVar(&u.DefaultReportingPeriod, "uds.reporting-period", u.DefaultReportingPeriod, "stats export period until a client sets one")

	fs.StringVar(&cfg.admin.Listen, "admin.listen", cfg.admin.Listen, "address of /metrics, /healthz, /readyz, /status.json and the status page at /; empty turns it off")
	fs.DurationVar(&cfg.admin.Status.Interval, "status.interval", cfg.admin.Status.Interval, "how often /status.json and the status page at / sample the metrics")
	fs.DurationVar(&cfg.admin.Status.Unviewed, "status.unviewed-interval", cfg.admin.Status.Unviewed, "how often the status is sampled while no one views it, held between -status.interval and half of -status.down-after (its charts still get a point per -status.interval, on a line between the gathers around it)")
	fs.DurationVar(&cfg.admin.Status.Window, "status.window", cfg.admin.Status.Window, "history the status page's charts show")
	fs.DurationVar(&cfg.admin.Status.DownAfter, "status.down-after", cfg.admin.Status.DownAfter, "a destination that holds data and acknowledged nothing for this long is shown down")
	fs.StringVar(&cfg.pprof.Listen, "pprof.listen", cfg.pprof.Listen, "loopback address of /debug/pprof/ (the command line is not served: flags may hold secrets); empty, the default, turns it off")
	fs.DurationVar(&cfg.pprof.MaxDuration, "pprof.max-duration", cfg.pprof.MaxDuration, "longest CPU profile or execution trace a request may ask for (otlpgate_pprof_refused_total)")
	fs.StringVar(&cfg.configFile, "config", "", "YAML file of flags: each key a flag's name without the dash (grpc.listen: 127.0.0.1:4317), a repeatable flag a list, dest a list of -dest values or mappings of -dest keys; ${env:NAME} and ${file:PATH} are resolved in every value; flags on the command line override it; an unknown key or a bad value stops the start (and -check) naming its line; on SIGHUP and on a change the destinations, the processing steps and the tenant rate are applied while otlpgate runs, a change of another key is logged as taking a restart, and an invalid file keeps the running configuration (otlpgate_config_reloads_total, otlpgate_config_reload_failures_total; docs/configuration.md)")
	fs.DurationVar(&cfg.configPoll, "config.poll-interval", cfg.configPoll, "how often -config is read for a change (0: only on SIGHUP)")
	fs.BoolVar(&cfg.version, "version", false, "print the version, the commit and the Go release otlpgate was built from, and exit (also logged at start and exported as otlpgate_build_info)")
	fs.BoolVar(&cfg.check, "check", false, "check the configuration and exit: every flag, -dest and -dest.file, the TLS, token and subscriptions files, without binding a port, dialling an upstream or writing to disk; prints a one-line summary and exits 0, or prints the error and exits 2")
	fs.StringVar(&cfg.logLevel, "log.level", cfg.logLevel, "debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log.format", cfg.logFormat, "text or json")
	fs.BoolVar(&cfg.rawIO, "net.raw-syscalls", cfg.rawIO, "read and write the sockets of the OTLP/gRPC, OTLP/HTTP and Kafka telemetry intakes, of the OpenCensus socket with -uds.engine=net, and of the destinations on the own gRPC transport or OTLP/HTTP with system calls the Go scheduler is not told of (they never block: the sockets are non-blocking), which spares a request arriving alone the wake-up of the runtime's monitor thread; false uses the standard calls (docs/benchmarks.md, where the CPU goes at low rates)")
	fs.DurationVar(&cfg.shutdown, "shutdown.timeout", cfg.shutdown, "bound on the whole shutdown: intakes stop within half of it, destinations drain for the rest; what is left is counted as lost (otlpgate_client_dropped_items_total{reason=~\"shutdown_.*\"}) and the exit status is 3")
}
