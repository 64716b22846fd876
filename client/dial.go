package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

// dialOptions builds the connection options of a destination. The connection's own reconnect
// backoff follows the retry settings, so that a stream re-opens as soon as the upstream is back
// and no later than RetryMax after.
func dialOptions(cfg Config, cc *frameCodec) ([]grpc.DialOption, error) {
	creds, err := transportCredentials(cfg.TLS)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(cc), grpc.MaxCallSendMsgSize(cfg.MaxSendMsgSize),
			grpc.MaxCallRecvMsgSize(cfg.MaxRecvMsgSize)),
		grpc.WithInitialWindowSize(cfg.InitialWindowSize),
		grpc.WithInitialConnWindowSize(cfg.InitialConnWindowSize),
		grpc.WithWriteBufferSize(cfg.WriteBufferSize),
		grpc.WithReadBufferSize(cfg.ReadBufferSize),
		experimental.WithBufferPool(bufferPool(cfg.ZeroBuffers)),
		// gRPC's transparent retry would keep references to sent payloads in its replay
		// buffer; retries and re-sends are this package's business.
		grpc.WithDisableRetry(),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.RetryInitial, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.RetryMax},
			MinConnectTimeout: 20 * time.Second,
		}),
		grpc.WithUserAgent("otlpgate"),
	}
	if cfg.KeepaliveTime > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout,
		}))
	}
	return opts, nil
}

// bufferPool is where the connection takes the buffers it reads frames into (answers, mostly):
// pool/'s tiers unzeroed, or with zero grpc-go's default pool, which zeroes each.
func bufferPool(zero bool) mem.BufferPool {
	if zero {
		return mem.DefaultBufferPool()
	}
	return codec.MemPool{}
}

func transportCredentials(t TLS) (credentials.TransportCredentials, error) {
	if t.Insecure {
		return insecure.NewCredentials(), nil
	}
	tc, err := tlsConfig(t)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tc), nil
}

// ClientConfig is the client TLS configuration of t, for a destination of another package
// (client/kafkadest) that is not Insecure. Safe for concurrent use.
func (t TLS) ClientConfig() (*tls.Config, error) { return tlsConfig(t) }

// tlsConfig builds the client TLS configuration of a destination that is not Insecure: the one
// place that reads tls-ca, tls-cert and tls-key, for gRPC and OTLP/HTTP alike.
func tlsConfig(t TLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: cannot read tls-ca: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: tls-ca %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = roots
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client: cannot load tls-cert/tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// outgoingMD is the metadata sent with every call: the configured headers and the bearer token.
func outgoingMD(cfg Config) (metadata.MD, error) {
	md := metadata.MD{}
	for k, v := range cfg.Headers {
		md.Append(k, v)
	}
	auth, err := cfg.authorization()
	if err != nil {
		return nil, err
	}
	if auth != "" {
		md.Set("authorization", auth)
	}
	return md, nil
}

// bearerAuth is the authorization value of a bearer-token-file, read by internal/credfile: the
// one reader of token files, for the intakes and the destinations alike.
func bearerAuth(path string) (string, error) {
	v, err := credfile.BearerToken(path)
	if err != nil {
		return "", fmt.Errorf("client: bearer-token-file: %w", err)
	}
	return v, nil
}
