package credfile

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ServerTLS loads a server certificate and key (PEM files) into a TLS configuration, TLS 1.2 at
// least. A non-empty clientCA names a PEM file of CA certificates: clients must then present a
// certificate signed by one of them (mutual TLS).
func ServerTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load TLS key pair: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("cannot read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("client CA file holds no PEM certificate")
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// BearerToken reads a token file and returns the value a request's Authorization header must
// hold: "Bearer " and the file's content without surrounding white space. An empty file is an
// error: it would let every request in. The token is never logged.
func BearerToken(path string) (string, error) {
	tok, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read token file: %w", err)
	}
	t := bytes.TrimSpace(tok)
	if len(t) == 0 {
		return "", errors.New("token file is empty")
	}
	return "Bearer " + string(t), nil
}
