package grpcserver

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Config of the gRPC intake. Every limit has a flag; cmd/otlpgate defines them.
type Config struct {
	// Listen address (-grpc.listen, default 127.0.0.1:4317); empty turns the intake off.
	Listen string
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
	// StreamWorkers serves calls on this many long-lived goroutines, a new goroutine per call
	// only when all are busy (-grpc.stream-workers, default 16; 0: a new goroutine per call).
	// Reused goroutines keep their grown stacks, so calls stop paying for stack growth.
	StreamWorkers uint32
	// SharedWriteBuffer releases a connection's write buffer between flushes
	// (-grpc.shared-write-buffer, default false).
	SharedWriteBuffer bool
	// KeepaliveTime pings an idle client after this long (-grpc.keepalive.time, default 2h);
	// KeepaliveTimeout closes the connection when the ping is not answered
	// (-grpc.keepalive.timeout, default 20s); KeepaliveMinTime is the shortest client ping
	// interval tolerated (-grpc.keepalive.min-time, default 10s).
	KeepaliveTime, KeepaliveTimeout, KeepaliveMinTime time.Duration
	// MaxConnections caps the connections open at once (-grpc.max-connections, default 4096);
	// further clients wait in the accept backlog until one closes.
	MaxConnections int
	// MaxConnectionIdle closes connections without streams after this long
	// (-grpc.max-connection-idle, default 0: never).
	MaxConnectionIdle time.Duration

	// StreamMaxAge and StreamMaxRequests end a stream (after answering everything it accepted)
	// so that clients re-open it and load balancers can spread them (-grpc.stream.max-age,
	// default 15m; -grpc.stream.max-requests, default 1000000). Both larger than the client's
	// re-balancing defaults, so that well-behaved clients re-balance first. 0 turns a limit off.
	StreamMaxAge      time.Duration
	StreamMaxRequests int64
	// StreamWindow is how many requests of one stream may wait for their batch at once in
	// -ack=upstream mode (-grpc.stream.window, default 256).
	StreamWindow int
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
	Limiter *fastpath.Limiter
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Listen:                "127.0.0.1:4317",
		MaxRecvMsgSize:        16 << 20,
		MaxConcurrentStreams:  1024,
		MaxConnections:        4096,
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
		OverloadAfter:         2 * time.Second,
		ScanDepth:             fastpath.DepthFull,
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
	case c.MaxRecvMsgSize <= 0:
		return errors.New("grpc: max receive message size must be positive")
	case c.MaxConcurrentStreams == 0:
		return errors.New("grpc: max concurrent streams must be positive")
	case c.MaxConnections <= 0:
		return errors.New("grpc: max connections must be positive")
	case c.InitialWindowSize < 64<<10 || c.InitialConnWindowSize < 64<<10:
		return errors.New("grpc: HTTP/2 windows must be at least 64KiB")
	case c.StreamWindow <= 0:
		return errors.New("grpc: stream window must be positive")
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
