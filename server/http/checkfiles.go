package httpserver

import (
	"crypto/tls"

	"github.com/otlpgate/otlpgate/internal/credfile"
)

// files reads what the server takes from disk: the bearer token ("" without AuthTokenFile) and
// the TLS configuration (nil without TLSCert). New and CheckFiles read them here alike.
func (c Config) files() (token string, tc *tls.Config, err error) {
	return credfile.Server("http", c.AuthTokenFile, c.TLSCert, c.TLSKey, c.TLSClientCA)
}

// CheckFiles reads the files New reads (the token file, the TLS certificate, key and client
// CA) without building a server: otlpgate -check. Safe for concurrent use.
func (c Config) CheckFiles() error {
	_, _, err := c.files()
	return err
}
