package httpserver

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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a client certificate.
type testPKI struct {
	caPool                    *x509.CertPool
	client                    tls.Certificate
	caFile, certFile, keyFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "otlpgate http test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &testPKI{caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	p.caFile = writePEMFile(t, dir, "ca.pem", "CERTIFICATE", caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) (*ecdsa.PrivateKey, []byte) {
		k := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return k, der
	}
	sk, sder := leaf(2, x509.ExtKeyUsageServerAuth)
	p.certFile = writePEMFile(t, dir, "server.pem", "CERTIFICATE", sder)
	skb, _ := x509.MarshalECPrivateKey(sk)
	p.keyFile = writePEMFile(t, dir, "server-key.pem", "EC PRIVATE KEY", skb)
	ck, cder := leaf(3, x509.ExtKeyUsageClientAuth)
	ckb, _ := x509.MarshalECPrivateKey(ck)
	p.client, err = tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cder}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ckb}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEMFile(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLSAndMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	body := traces(t, 1, 2)
	post := func(e *env, tc *tls.Config) (int, error) {
		hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tc}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Post(strings.Replace(e.url, "http://", "https://", 1)+"/v1/traces", ctProto, strings.NewReader(string(body)))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	sc := DefaultConfig()
	sc.TLSCert, sc.TLSKey = pki.certFile, pki.keyFile
	e := start(t, testPipelineConfig(), sc, nil)
	if code, err := post(e, &tls.Config{RootCAs: pki.caPool}); err != nil || code != 200 {
		t.Errorf("TLS: %d %v", code, err)
	}
	// A client that would take HTTP/2 (ALPN h2, as Go's default transport and OkHttp offer)
	// falls back to HTTP/1.1: the server does not offer h2.
	h2 := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.caPool}, ForceAttemptHTTP2: true}}
	resp, err := h2.Post(strings.Replace(e.url, "http://", "https://", 1)+"/v1/traces", ctProto, strings.NewReader(string(body)))
	if err != nil || resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" {
		t.Errorf("HTTP/2-capable client: %v %v", resp, err)
	}
	if err == nil {
		resp.Body.Close()
	}
	h2.CloseIdleConnections()
	if _, err := post(e, &tls.Config{}); err == nil {
		t.Error("a client without the CA trusted the server")
	}
	// Plain HTTP to the TLS port gets no answer it could mistake for success.
	if r, err := e.try("POST", "/v1/traces", map[string]string{"Content-Type": ctProto}, body); err == nil && r.status == 200 {
		t.Error("plain HTTP accepted on the TLS port")
	}

	sc.TLSClientCA = pki.caFile
	m := start(t, testPipelineConfig(), sc, nil)
	if code, err := post(m, &tls.Config{RootCAs: pki.caPool, Certificates: []tls.Certificate{pki.client}}); err != nil || code != 200 {
		t.Errorf("mTLS with a client certificate: %d %v", code, err)
	}
	if code, err := post(m, &tls.Config{RootCAs: pki.caPool}); err == nil {
		t.Errorf("mTLS without a client certificate answered %d", code)
	}
	m.p.Flush()
	if _, items := m.rec.Payload(); items != 2 {
		t.Errorf("mTLS destination got %d items, want 2", items)
	}
}

func TestBadCredentialFiles(t *testing.T) {
	p, cleanup := newPipeline(t)
	defer cleanup()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	for _, sc := range []Config{
		func() Config { c := DefaultConfig(); c.AuthTokenFile = filepath.Join(dir, "missing"); return c }(),
		func() Config { c := DefaultConfig(); c.AuthTokenFile = empty; return c }(),
		func() Config { c := DefaultConfig(); c.TLSCert, c.TLSKey = empty, empty; return c }(),
	} {
		if _, err := New(sc, p, nil); err == nil || !strings.HasPrefix(err.Error(), "http: ") {
			t.Errorf("%+v: %v", sc, err)
		}
	}
}
