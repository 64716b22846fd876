package httpserver

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// Config of the OTLP/HTTP intake. Every limit has a flag; cmd/otlpgate defines them.
type Config struct {
	// Listen address (-http.listen, default 127.0.0.1:4318); empty turns the intake off.
	Listen string
	// TracesPath, MetricsPath and LogsPath are the paths of the three signals
	// (-http.traces-path, -http.metrics-path, -http.logs-path; default /v1/traces, /v1/metrics,
	// /v1/logs). Any other path is answered 404.
	TracesPath, MetricsPath, LogsPath string
	// MaxRequestBytes caps a request body, on the wire and again after decompression
	// (-http.max-request-bytes, default 64MiB). Larger bodies are answered 413.
	MaxRequestBytes int
	// MaxHeaderBytes caps the request line and headers (-http.max-header-bytes, default 16KiB);
	// larger ones are answered 431. It is also each connection's read buffer.
	MaxHeaderBytes int
	// MaxConnections caps the connections open at once (-http.max-connections, default 4096);
	// further clients wait in the accept backlog until one closes.
	MaxConnections int
	// ReadTimeout bounds reading one request, headers and body (-http.read-timeout, default
	// 30s); WriteTimeout bounds writing one response (-http.write-timeout, default 30s);
	// IdleTimeout closes a keep-alive connection that sends nothing this long
	// (-http.idle-timeout, default 2m). Together they keep slow clients from holding
	// connections.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// OverloadAfter is how long requests must keep being refused for want of queue space before
	// the answer turns from 429 into 503 (-http.overload-after, default 2s), as
	// -grpc.overload-after ends calls with UNAVAILABLE.
	OverloadAfter time.Duration
	// Limiter is the process-wide intake limiter (-intake.*), nil for none. A request's body
	// buffer takes its bytes from it as it grows while the body arrives (never what the
	// Content-Length declares ahead of the bytes), and so does the buffer a compressed body is
	// inflated into, before anything is inflated into it; both are given back once admission
	// copied the body. A request the limiter refuses is answered 429 with Retry-After. The
	// budget must hold twice -http.max-request-bytes: a body and its decompressed copy, or a
	// buffer and the one it grows into.
	Limiter *admission.Limiter
	// Tenants is the tenant table (-intake.headers), nil for none: a request's values of its
	// headers are read before its body, and a request the table refuses (a new value past
	// -intake.max-tenants, a bad value, a value no destination takes) is answered 403 or 400
	// without its body being read.
	Tenants *tenant.Table
	// ScanDepth is how deep requests are validated; cmd/otlpgate sets it from -grpc.scan-depth,
	// which serves both intakes.
	ScanDepth fastpath.Depth

	// TLS: server certificate and key files, and a client CA file that turns on mutual TLS
	// (-http.tls.cert, -http.tls.key, -http.tls.client-ca).
	TLSCert, TLSKey, TLSClientCA string
	// AuthTokenFile, when set, holds a bearer token every request must present in its
	// "Authorization: Bearer <token>" header (-http.auth.token-file, or -auth.token-file for
	// both intakes).
	AuthTokenFile string

	// CORS answers browsers: origins allowed to send (exact, such as "https://app.example.com";
	// with one "*" standing for any run of characters, such as "https://*.example.com" or
	// "*.example.com"; or "*" for any origin; -http.cors.allowed-origins, default none: CORS off), extra request
	// headers they may send beyond Content-Type and Content-Encoding
	// (-http.cors.allowed-headers; "*" for any), and how long a browser may cache a preflight
	// answer (-http.cors.max-age, default 0: the header is left out).
	CORSAllowedOrigins []string
	CORSAllowedHeaders []string
	CORSMaxAge         time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:4318",
		TracesPath:      "/v1/traces",
		MetricsPath:     "/v1/metrics",
		LogsPath:        "/v1/logs",
		MaxRequestBytes: 64 << 20,
		MaxHeaderBytes:  16 << 10,
		MaxConnections:  4096,
		ReadTimeout:     30 * time.Second,
		WriteTimeout:    30 * time.Second,
		IdleTimeout:     2 * time.Minute,
		OverloadAfter:   2 * time.Second,
		ScanDepth:       fastpath.DepthFull,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("http: bad listen address %q: %w", c.Listen, err)
	}
	paths := []string{c.TracesPath, c.MetricsPath, c.LogsPath}
	for i, p := range paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("http: path %q must start with /", p)
		}
		for _, q := range paths[:i] {
			if p == q {
				return fmt.Errorf("http: two signals share the path %q", p)
			}
		}
	}
	switch {
	case c.MaxRequestBytes <= 0:
		return errors.New("http: max request bytes must be positive")
	case c.MaxHeaderBytes < 1<<10:
		return errors.New("http: max header bytes must be at least 1KiB")
	case c.MaxConnections <= 0:
		return errors.New("http: max connections must be positive")
	case c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0:
		return errors.New("http: read, write and idle timeouts must be positive")
	case c.OverloadAfter < 0:
		return errors.New("http: overload-after must not be negative")
	case c.CORSMaxAge < 0:
		return errors.New("http: CORS max age must not be negative")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("http: TLS needs both a certificate and a key")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return errors.New("http: a client CA (mTLS) needs a server certificate")
	case c.ScanDepth > fastpath.DepthFull:
		return errors.New("http: bad scan depth")
	case c.Limiter != nil && 2*int64(c.MaxRequestBytes) > c.Limiter.MaxBytes():
		return fmt.Errorf("http: twice the max request bytes %d (a body and its decompressed copy) exceeds the intake limit %d (-intake.max-bytes)", c.MaxRequestBytes, c.Limiter.MaxBytes())
	}
	for _, o := range c.CORSAllowedOrigins {
		if o == "" || strings.Count(o, "*") > 1 {
			return fmt.Errorf("http: bad CORS origin %q (want an exact origin, one with a single * such as https://*.example.com, or *)", o)
		}
	}
	return nil
}
