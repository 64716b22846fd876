package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// certs is a throwaway CA with a server certificate for "gateway.test" and a client
// certificate, written as PEM files.
type certs struct {
	dir                                   string
	ca                                    *x509.Certificate
	caKey                                 *ecdsa.PrivateKey
	pool                                  *x509.CertPool
	server                                tls.Certificate
	caFile, clientCert, clientKey, tokenF string
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	c := &certs{dir: t.TempDir()}
	var err error
	c.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "otlpgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &c.caKey.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	c.ca, _ = x509.ParseCertificate(der)
	c.pool = x509.NewCertPool()
	c.pool.AddCert(c.ca)
	c.caFile = c.write(t, "ca.pem", "CERTIFICATE", der)

	srvDER, srvKey := c.issue(t, 2, "gateway.test", x509.ExtKeyUsageServerAuth)
	c.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := c.issue(t, 3, "edge", x509.ExtKeyUsageClientAuth)
	c.clientCert = c.write(t, "client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	c.clientKey = c.write(t, "client-key.pem", "EC PRIVATE KEY", keyDER)
	c.tokenF = filepath.Join(c.dir, "token")
	if err := os.WriteFile(c.tokenF, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *certs) issue(t *testing.T, serial int64, name string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func (c *certs) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A destination configured by -dest with mutual TLS and a bearer token delivers to an upstream
// that requires both; without the client certificate it delivers nothing.
func TestTLS(t *testing.T) {
	c := newCerts(t)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{c.server}, ClientCAs: c.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	u := newUpstream(t, grpc.Creds(creds))
	var auth []string
	u.srvCtxHook = func(md metadata.MD) {
		u.mu.Lock()
		auth = append(auth, strings.Join(md.Get("authorization"), ","))
		u.mu.Unlock()
	}
	base := testConfig(t, "")
	spec := "name=" + base.Name + ",endpoint=" + u.addr + ",protocol=otep,mode=unary,concurrency=1" +
		",tls-ca=" + c.caFile + ",tls-cert=" + c.clientCert + ",tls-key=" + c.clientKey +
		",tls-server-name=gateway.test,bearer-token-file=" + c.tokenF
	cfg, err := ParseDest(spec, base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.Insecure {
		t.Fatal("tls-* keys did not turn TLS on")
	}
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 2, 1, 10)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	u.mu.Lock()
	if len(auth) != 2 || auth[0] != "Bearer s3cret" || auth[1] != "Bearer s3cret" {
		t.Errorf("authorization metadata %q", auth)
	}
	u.mu.Unlock()

	// Without a client certificate the handshake fails: the requests are retried until
	// the retry budget ends, and the upstream never sees one.
	noCert := cfg
	noCert.Name += "_nocert"
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	noCert.RetryMaxElapsed = 200 * time.Millisecond
	d2 := startDest(t, noCert)
	f2 := newFeeder(t, d2)
	f2.send(10, 1, 1, 10)
	if f2.wait(0) {
		t.Error("delivered without a client certificate")
	}
	if n := len(u.received()); n != 2 {
		t.Errorf("upstream received %d requests, want the 2 sent with a certificate", n)
	}
}
