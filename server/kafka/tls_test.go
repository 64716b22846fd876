package kafka

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
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a client certificate,
// and a second CA's client certificate that the server must not take.
type testPKI struct {
	caPool                    *x509.CertPool
	client, stranger          tls.Certificate
	caFile, certFile, keyFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{caPool: x509.NewCertPool()}
	ca, caKey, caDER := newCA(t, "otlpgate kafka test CA")
	p.caPool.AddCert(ca)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	sk, sder := newLeaf(t, ca, caKey, 2, x509.ExtKeyUsageServerAuth)
	p.certFile = writePEM(t, dir, "server.pem", "CERTIFICATE", sder)
	skb, _ := x509.MarshalECPrivateKey(sk)
	p.keyFile = writePEM(t, dir, "server-key.pem", "EC PRIVATE KEY", skb)
	ck, cder := newLeaf(t, ca, caKey, 3, x509.ExtKeyUsageClientAuth)
	p.client = keyPair(t, ck, cder)
	other, otherKey, _ := newCA(t, "another CA")
	ok, oder := newLeaf(t, other, otherKey, 4, x509.ExtKeyUsageClientAuth)
	p.stranger = keyPair(t, ok, oder)
	return p
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key, der
}

func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, usage x509.ExtKeyUsage) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func keyPair(t *testing.T, key *ecdsa.PrivateKey, der []byte) tls.Certificate {
	t.Helper()
	kb, _ := x509.MarshalECPrivateKey(key)
	c, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dialTLS connects a kmsg client over crypto/tls, presenting certs.
func dialTLS(t *testing.T, s *Server, pki *testPKI, certs ...tls.Certificate) (*client, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	nc, err := tls.DialWithDialer(d, "tcp", s.Addr().String(), &tls.Config{RootCAs: pki.caPool, Certificates: certs})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("tls-client"))}, nil
}

// With -kafka.tls.client-ca, a client presenting a certificate the CA signed has its
// telemetry forwarded; one without a certificate, one with another CA's, and one speaking
// plain TCP get nothing through, and each failed handshake is counted.
func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	cfg := testConfig()
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = pki.certFile, pki.keyFile, pki.caFile
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	payload, _ := testMetrics("m").MarshalVT()

	c, err := dialTLS(t, s, pki, pki.client)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.apiVersions(3, "librdkafka", "2.5.0"); r.ErrorCode != errNone {
		t.Fatalf("ApiVersions: code %d", r.ErrorCode)
	}
	sub := c.get([16]byte{})
	clk.Advance(cfg.DefaultInterval)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
		t.Fatalf("push: code %d", code)
	}
	n, md, _ := lastMetrics(t, rec)
	if n != 1 || resourceLabels(md)[labelClientID] != "tls-client" || md.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].Name != "m" {
		t.Fatalf("%d forwarded: %v", n, md)
	}

	refused := func(name string, try func() error) {
		t.Helper()
		before := counterValue(t, tlsHandshakeErrors)
		if err := try(); err == nil {
			t.Fatalf("%s: served", name)
		}
		testkit.WaitFor(t, name+"'s handshake error to be counted", func() bool { return counterValue(t, tlsHandshakeErrors) == before+1 })
	}
	// A TLS 1.3 client finishes its side of the handshake before the server has checked its
	// certificate: the refusal shows on the first read.
	firstRequest := func(certs ...tls.Certificate) func() error {
		return func() error {
			c, err := dialTLS(t, s, pki, certs...)
			if err != nil {
				return err
			}
			req := kmsg.NewPtrApiVersionsRequest()
			c.write(c.fmt.AppendRequest(nil, req, 1))
			c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.nc.Read(make([]byte, 1))
			return err
		}
	}
	refused("no certificate", firstRequest())
	refused("another CA's certificate", firstRequest(pki.stranger))
	refused("plain TCP", func() error {
		c := dial(t, s, "plain")
		c.write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		var b [512]byte
		n, err := c.nc.Read(b[:])
		// The server may answer with a TLS alert record before it closes; never with Kafka.
		if err == nil && n > 0 && b[0] != 0x15 {
			return nil
		}
		return errOrClosed(err)
	})
	if rec.Count() != 1 {
		t.Fatalf("%d pushes forwarded", rec.Count())
	}
}

// errOrClosed turns a clean read into an error: the connection answered nothing usable.
func errOrClosed(err error) error {
	if err != nil {
		return err
	}
	return net.ErrClosed
}

// With a certificate but no client CA, the listener is encrypted and serves every client.
func TestTLSWithoutClientCA(t *testing.T) {
	pki := newTestPKI(t)
	cfg := testConfig()
	cfg.TLSCert, cfg.TLSKey = pki.certFile, pki.keyFile
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	c, err := dialTLS(t, s, pki)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.apiVersions(3, "librdkafka", "2.5.0"); r.ErrorCode != errNone || len(r.ApiKeys) != len(supportedAPIs) {
		t.Fatalf("ApiVersions: %+v", r)
	}
	// A client that does not trust the server's CA does not get through either.
	if _, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{}); err == nil {
		t.Fatal("a client without the CA trusted the server")
	}
}

// A client that opens a TLS connection and never says anything is closed after the read
// timeout, not the idle timeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	pki := newTestPKI(t)
	cfg := testConfig()
	cfg.TLSCert, cfg.TLSKey = pki.certFile, pki.keyFile
	cfg.ReadTimeout = 200 * time.Millisecond
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	before := counterValue(t, tlsHandshakeErrors)
	c := dial(t, s, "silent")
	c.expectClosed()
	// The handshake's context closes the connection before the error is counted.
	testkit.WaitFor(t, "the handshake error to be counted", func() bool { return counterValue(t, tlsHandshakeErrors)-before == 1 })
}
