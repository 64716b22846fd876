package grpcserver

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// Config of the gRPC intake. Every limit has a flag; cmd/otlpgate defines them.
type Config struct {
	// Listen address (-grpc.listen, default 127.0.0.1:4317); empty turns the intake off.
	Listen string
	// Transport is the HTTP/2 transport that serves the listener (-grpc.transport, default
	// otlpgate): TransportOwn, otlpgate's own, which serves the v1 Export methods and the OTEP
	// UnaryExporter and StreamExporter (h2c with prior knowledge, or TLS with ALPN h2), or
	// TransportGRPCGo. Empty is grpc-go.
	Transport string
	// MaxRecvMsgSize caps one request (-grpc.max-recv-msg-size, default 16MiB); larger requests
	// are refused by gRPC with RESOURCE_EXHAUSTED.
	MaxRecvMsgSize int
	// MaxConcurrentStreams per HTTP/2 connection (-grpc.max-concurrent-streams, default 1024).
	MaxConcurrentStreams uint32
	// InitialWindowSize and InitialConnWindowSize are the HTTP/2 flow-control windows per stream
	// and per connection (-grpc.http2.stream-window, default 1MiB; -grpc.http2.conn-window,
	// default 8MiB). Large windows keep pipelined streams full on long round trips.
	InitialWindowSize     int32
	InitialConnWindowSize int32
	// ReadBufferSize and WriteBufferSize of each connection (-grpc.read-buffer, -grpc.write-buffer, default 256KiB).
	ReadBufferSize, WriteBufferSize int
	// ZeroBuffers has grpc-go's own buffer pool serve the connections' receive buffers, which
	// zeroes each buffer it hands out (-grpc.zero-buffers, default false). By default they come
	// from pool/'s tiers unzeroed (codec.MemPool): gRPC fills a frame's buffer from the
	// connection before anyone reads it, and zeroing 16 KiB per frame was 6% of otlpgate's CPU
	// on 1000-span batches (docs/benchmarks.md, "Where the CPU above the floor goes").
	ZeroBuffers bool
	// PassThrough is the grpc-encoding (codec.Gzip or codec.Zstd; "" for none) whose v1
	// requests keep the bytes they arrived as beside their decompressed form
	// (-grpc.passthrough-encoding, default gzip, the Collector's OTLP exporter's default), so that
	// a batch of them can be sent on without compressing it again (fastpath's compressed
	// pass-through, -compression.passthrough). gRPC lets a server keep them for one encoding
	// only (codec.WireDecompressor); requests in another are decompressed as before. The
	// compressor of that name must be registered (codec.RegisterCompressorsWith) before New.
	PassThrough string
	// StreamWorkers serves calls on this many long-lived goroutines, a new goroutine per call
	// only when all are busy (-grpc.stream-workers, default 16; 0: a new goroutine per call).
	// Reused goroutines keep their grown stacks, so calls stop paying for stack growth.
	StreamWorkers uint32
	// KeepaliveTime pings an idle client after this long (-grpc.keepalive.time, default 2h);
	// KeepaliveTimeout closes the connection when the ping is not answered
	// (-grpc.keepalive.timeout, default 20s); KeepaliveMinTime is the shortest client ping
	// interval tolerated (-grpc.keepalive.min-time, default 10s).
	KeepaliveTime, KeepaliveTimeout, KeepaliveMinTime time.Duration
	// MaxConnections caps the connections open at once (-grpc.max-connections, default 4096);
	// further clients wait in the accept backlog until one closes.
	MaxConnections int
	// MaxConnectionsPerPeer caps the connections of one client address, so that one host
	// cannot take every connection (-grpc.max-connections-per-peer, default 1024; 0: no cap).
	// Further connections from it are closed at once, counted in
	// otlpgate_grpc_refused_connections_total{reason="per_peer"}.
	MaxConnectionsPerPeer int
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2 preface
	// (-grpc.handshake-timeout, default 10s): a connection that says nothing holds a slot of
	// MaxConnections no longer.
	HandshakeTimeout time.Duration
	// MaxConnectionIdle closes connections without calls after this long
	// (-grpc.max-connection-idle, default 5m; 0: never). MaxConnectionAge closes any connection
	// after this long, with a GOAWAY that lets clients move to a new one, and
	// MaxConnectionAgeGrace is how long its calls may still run before it is cut
	// (-grpc.max-connection-age, default 1h; -grpc.max-connection-age-grace, default 20m, longer
	// than the default -grpc.stream.max-age so that streams end on their own first; 0: never).
	MaxConnectionIdle, MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// MaxHeaderBytes bounds the header list of a call, as HPACK decodes it
	// (-grpc.max-header-bytes, default 16KiB). OTLP clients send a few hundred bytes; HPACK's
	// indexing lets a client send a large list for a few bytes a field, so the bound is on the
	// decoded size. A longer list resets the stream (RST_STREAM FRAME_SIZE_ERROR), counted in
	// otlpgate_grpc_refused_streams_total{reason="header_too_large"}.
	MaxHeaderBytes int
	// RecvTimeout bounds the receipt of one message, from the stream's headers (for its first
	// message) or from the message's first byte (for the others) to its last byte
	// (-grpc.recv-timeout, default 30s). A connection that keeps a message unfinished longer is
	// closed: gRPC cannot abandon one stream's half-received message, and each may hold up to
	// -grpc.max-recv-msg-size. Counted in otlpgate_grpc_closed_connections_total{reason="recv_timeout"}.
	// Waiting between messages is not bounded by it (see StreamMaxAge).
	RecvTimeout time.Duration
	// MaxConnRecvBytes caps the bytes of unfinished messages one connection may have sent beyond
	// the initial stream window of each (InitialWindowSize; within it a client may send without
	// the server reading, which many concurrent uploads do) and beyond what its calls reserved
	// from Limiter (a reserved message is the call's to receive: calls past the connection's
	// share are refused one by one, never by closing the connection under the others; see
	// watch.limit) (-grpc.max-conn-recv-bytes, default 0: twice MaxRecvMsgSize, 32MiB with its default; at
	// least MaxRecvMsgSize when set), so that it follows a raised message size; past it the
	// connection is closed, counted in otlpgate_grpc_closed_connections_total{reason="recv_bytes"}.
	MaxConnRecvBytes int64

	// StreamMaxAge and StreamMaxRequests end a stream (after answering everything it accepted)
	// so that clients re-open it and load balancers can spread them (-grpc.stream.max-age,
	// default 15m; -grpc.stream.max-requests, default 1000000). Both larger than the client's
	// re-balancing defaults, so that well-behaved clients re-balance first. 0 turns a limit off.
	StreamMaxAge      time.Duration
	StreamMaxRequests int64
	// StreamWindow is how many requests of one stream may wait for their batch at once in
	// -ack=upstream mode (-grpc.stream.window, default 256).
	StreamWindow int
	// StreamMaxUnsent is how many answers of one OTEP stream may wait to be taken by the
	// client (HTTP/2 flow control: a client that grants no window takes none) before the
	// stream stops reading requests (-grpc.stream.max-unsent, default 64), counted in
	// otlpgate_grpc_stream_stalls_total. StreamAnswerTimeout is how long it then waits for the
	// client to take one (-grpc.stream.answer-timeout, default 30s) before the connection is
	// closed: gRPC frees a stream's unsent answers only with its connection. Counted in
	// otlpgate_grpc_closed_connections_total{reason="answers_not_taken"}. The own transport
	// (TransportOwn) ends only the stream, RESOURCE_EXHAUSTED, counted in
	// otlpgate_grpc_stream_answer_timeouts_total.
	StreamMaxUnsent     int
	StreamAnswerTimeout time.Duration
	// OverloadAfter is how long requests must keep being refused for want of queue space before
	// a stream or unary call is ended with UNAVAILABLE and RetryInfo instead of FailedRetryable
	// (-grpc.overload-after, default 2s).
	OverloadAfter time.Duration
	// ScanDepth is how deep requests are validated (-grpc.scan-depth=top|resource|full, default
	// full). Counting items needs resource; full also checks every nested message.
	ScanDepth fastpath.Depth

	// TLS: server certificate and key files, and a client CA file that turns on mutual TLS
	// (-grpc.tls.cert, -grpc.tls.key, -grpc.tls.client-ca).
	TLSCert, TLSKey, TLSClientCA string
	// AuthTokenFile, when set, holds a bearer token every call must present in the
	// "authorization: Bearer <token>" metadata (-grpc.auth.token-file).
	AuthTokenFile string

	// Limiter is the process-wide intake limiter (-intake.*), nil for none: a call reserves
	// MaxRecvMsgSize before its message is read, from its connection's share
	// (-intake.max-conn-bytes) and -intake.max-bytes, and a connection whose reservations
	// see no progress for -intake.progress-timeout is closed (see takeRecv and
	// connbudget.go); compressed messages inflate into its inflate budget (InflateBudget). A
	// refused call ends with RESOURCE_EXHAUSTED and RetryInfo, counted in
	// otlpgate_intake_refused_total{intake="grpc"}.
	Limiter *admission.Limiter
	// Tenants is the tenant table (-intake.headers), nil for none: a call's values of its
	// headers are read from its metadata before its first message, and a call the table
	// refuses ends with RESOURCE_EXHAUSTED (a new value past -intake.max-tenants, without
	// RetryInfo: not worth retrying), INVALID_ARGUMENT (a bad value) or PERMISSION_DENIED (a
	// value no destination takes), counted in otlpgate_tenant_refused_requests_total.
	Tenants *tenant.Table
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Listen:                "127.0.0.1:4317",
		Transport:             TransportOwn,
		MaxRecvMsgSize:        16 << 20,
		MaxConcurrentStreams:  1024,
		MaxConnections:        4096,
		MaxConnectionsPerPeer: 1024,
		HandshakeTimeout:      10 * time.Second,
		MaxConnectionIdle:     5 * time.Minute,
		MaxConnectionAge:      time.Hour,
		MaxConnectionAgeGrace: 20 * time.Minute,
		MaxHeaderBytes:        16 << 10,
		RecvTimeout:           30 * time.Second,
		InitialWindowSize:     1 << 20,
		InitialConnWindowSize: 8 << 20,
		ReadBufferSize:        256 << 10,
		WriteBufferSize:       256 << 10,
		StreamWorkers:         16,
		KeepaliveTime:         2 * time.Hour,
		KeepaliveTimeout:      20 * time.Second,
		KeepaliveMinTime:      10 * time.Second,
		StreamMaxAge:          15 * time.Minute,
		StreamMaxRequests:     1_000_000,
		StreamWindow:          256,
		StreamMaxUnsent:       64,
		StreamAnswerTimeout:   30 * time.Second,
		OverloadAfter:         2 * time.Second,
		ScanDepth:             fastpath.DepthFull,
		PassThrough:           codec.Gzip,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("grpc: bad listen address %q: %w", c.Listen, err)
	}
	switch {
	case c.Transport != "" && c.Transport != TransportGRPCGo && c.Transport != TransportOwn:
		return fmt.Errorf("grpc: transport %q is not %s or %s", c.Transport, TransportGRPCGo, TransportOwn)
	case c.MaxRecvMsgSize <= 0:
		return errors.New("grpc: max receive message size must be positive")
	case c.PassThrough != "" && c.PassThrough != codec.Gzip && c.PassThrough != codec.Zstd:
		return fmt.Errorf("grpc: pass-through encoding %q is not gzip, zstd or empty", c.PassThrough)
	case c.MaxConcurrentStreams == 0:
		return errors.New("grpc: max concurrent streams must be positive")
	case c.MaxConnections <= 0:
		return errors.New("grpc: max connections must be positive")
	case c.InitialWindowSize < 64<<10 || c.InitialConnWindowSize < 64<<10:
		return errors.New("grpc: HTTP/2 windows must be at least 64KiB")
	case c.MaxConnectionsPerPeer < 0:
		return errors.New("grpc: max connections per peer must not be negative")
	case c.HandshakeTimeout <= 0:
		return errors.New("grpc: handshake timeout must be positive")
	case c.MaxConnectionIdle < 0 || c.MaxConnectionAge < 0 || c.MaxConnectionAgeGrace < 0:
		return errors.New("grpc: connection idle time, age and grace must not be negative")
	case c.MaxHeaderBytes < 1<<10 || c.MaxHeaderBytes > 16<<20:
		return errors.New("grpc: max header bytes must be between 1KiB and 16MiB")
	case c.RecvTimeout <= 0:
		return errors.New("grpc: receive timeout must be positive")
	case c.MaxConnRecvBytes < 0 || c.MaxConnRecvBytes > 0 && c.MaxConnRecvBytes < int64(c.MaxRecvMsgSize):
		return fmt.Errorf("grpc: max connection receive bytes %d below the max receive message size %d", c.MaxConnRecvBytes, c.MaxRecvMsgSize)
	case c.StreamWindow <= 0:
		return errors.New("grpc: stream window must be positive")
	case c.StreamMaxUnsent <= 0 || c.StreamMaxUnsent > 1<<16:
		return errors.New("grpc: stream max unsent answers must be between 1 and 65536")
	case c.StreamAnswerTimeout <= 0:
		return errors.New("grpc: stream answer timeout must be positive")
	case c.StreamMaxAge < 0 || c.StreamMaxRequests < 0:
		return errors.New("grpc: stream limits must not be negative")
	case c.OverloadAfter < 0:
		return errors.New("grpc: overload-after must not be negative")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("grpc: TLS needs both a certificate and a key")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return errors.New("grpc: a client CA (mTLS) needs a server certificate")
	case c.ScanDepth > fastpath.DepthFull:
		return errors.New("grpc: bad scan depth")
	case c.Limiter != nil && int64(c.MaxRecvMsgSize) > c.Limiter.MaxBytes():
		return fmt.Errorf("grpc: max receive message size %d exceeds the intake limit %d (-intake.max-bytes)", c.MaxRecvMsgSize, c.Limiter.MaxBytes())
	case c.Limiter != nil && int64(c.MaxRecvMsgSize) > c.Limiter.MaxConnBytes():
		return fmt.Errorf("grpc: max receive message size %d exceeds what one connection may hold %d (-intake.max-conn-bytes)", c.MaxRecvMsgSize, c.Limiter.MaxConnBytes())
	case c.Limiter != nil && int64(c.MaxRecvMsgSize) > c.Limiter.MaxInflateBytes():
		return fmt.Errorf("grpc: max receive message size %d exceeds the inflate budget %d (-intake.inflate-bytes)", c.MaxRecvMsgSize, c.Limiter.MaxInflateBytes())
	}
	return nil
}

// connRecvBytes is MaxConnRecvBytes with its default applied.
func (c *Config) connRecvBytes() int64 {
	if c.MaxConnRecvBytes > 0 {
		return c.MaxConnRecvBytes
	}
	return 2 * int64(c.MaxRecvMsgSize)
}
