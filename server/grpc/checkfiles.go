package grpcserver

import (
	"crypto/tls"
	"fmt"

	"github.com/otlpgate/otlpgate/internal/credfile"
)

// files reads what the server takes from disk: the bearer token ("" without AuthTokenFile) and
// the TLS configuration (nil without TLSCert). New and CheckFiles read them here alike.
func (c Config) files() (token string, tc *tls.Config, err error) {
	if c.AuthTokenFile != "" {
		if token, err = credfile.BearerToken(c.AuthTokenFile); err != nil {
			return "", nil, fmt.Errorf("grpc: %w", err)
		}
	}
	if c.TLSCert != "" {
		if tc, err = credfile.ServerTLS(c.TLSCert, c.TLSKey, c.TLSClientCA); err != nil {
			return "", nil, fmt.Errorf("grpc: %w", err)
		}
	}
	return token, tc, nil
}

// CheckFiles reads the files New reads (the token file, the TLS certificate, key and client
// CA) without building a server: otlpgate -check. Safe for concurrent use.
func (c Config) CheckFiles() error {
	_, _, err := c.files()
	return err
}
