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

// Server reads what an intake server takes from disk, for both its start and otlpgate -check:
// the bearer token a request must carry ("" without tokenFile) and the TLS configuration (nil
// without certFile). name prefixes the errors ("grpc", "http").
func Server(name, tokenFile, certFile, keyFile, clientCA string) (token string, tc *tls.Config, err error) {
	if tokenFile != "" {
		if token, err = BearerToken(tokenFile); err != nil {
			return "", nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if certFile != "" {
		if tc, err = ServerTLS(certFile, keyFile, clientCA); err != nil {
			return "", nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return token, tc, nil
}

// BearerToken reads a token file and returns the value a request's Authorization header must
// hold: "Bearer " and the file's content without surrounding white space. An empty file is an
// error: it would let every request in. Errors name the file; the token is never logged.
func BearerToken(path string) (string, error) {
	tok, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read token file: %w", err)
	}
	t := bytes.TrimSpace(tok)
	if len(t) == 0 {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return "Bearer " + string(t), nil
}

// Binding is one line of a tokens file: a bearer token and what it is bound to, as written.
type Binding struct {
	Token string
	To    string
	Line  int // 1-based, for messages that must not quote the token
}

// Bindings reads a tokens file (-auth.tenants-file): one binding a line, the token, white
// space, then what it is bound to (the rest of the line, trimmed); blank lines and lines
// starting with '#' are skipped. A line without both parts, a token named twice and a file
// without a binding are errors, which name the line, never a token: an empty file would
// refuse every request. Read again on every call (SIGHUP).
func Bindings(path string) ([]Binding, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read tokens file: %w", err)
	}
	var out []Binding
	seen := map[string]int{}
	for i, l := range bytes.Split(b, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		tok, to := l, []byte(nil)
		if j := bytes.IndexAny(l, " \t"); j >= 0 {
			tok, to = l[:j], bytes.TrimSpace(l[j+1:])
		}
		if len(to) == 0 {
			return nil, fmt.Errorf("tokens file line %d: want a token, white space and what it is bound to", i+1)
		}
		if first, ok := seen[string(tok)]; ok {
			return nil, fmt.Errorf("tokens file line %d: the token of line %d again", i+1, first)
		}
		seen[string(tok)] = i + 1
		out = append(out, Binding{Token: string(tok), To: string(to), Line: i + 1})
	}
	if len(out) == 0 {
		return nil, errors.New("tokens file holds no token")
	}
	return out, nil
}
