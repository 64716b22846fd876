package grpcserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a client certificate.
type pki struct {
	dir                       string
	caPool                    *x509.CertPool
	clientCert                tls.Certificate
	caFile, certFile, keyFile string
	otherCAFile               string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{dir: dir}
	caKey, caCert, caDER := makeCA(t, "otlpgate test CA")
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(caCert)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	_, _, otherDER := makeCA(t, "unrelated CA")
	p.otherCAFile = writePEM(t, dir, "other-ca.pem", "CERTIFICATE", otherDER)

	srvKey, srvDER := makeLeaf(t, caKey, caCert, "server", x509.ExtKeyUsageServerAuth)
	p.certFile = writePEM(t, dir, "server.pem", "CERTIFICATE", srvDER)
	kb, _ := x509.MarshalECPrivateKey(srvKey)
	p.keyFile = writePEM(t, dir, "server-key.pem", "EC PRIVATE KEY", kb)

	cliKey, cliDER := makeLeaf(t, caKey, caCert, "client", x509.ExtKeyUsageClientAuth)
	ckb, _ := x509.MarshalECPrivateKey(cliKey)
	var err error
	p.clientCert, err = tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ckb}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func makeCA(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return key, cert, der
}

func makeLeaf(t *testing.T, caKey *ecdsa.PrivateKey, ca *x509.Certificate, name string, usage x509.ExtKeyUsage) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func startTLS(t *testing.T, sc Config) string {
	t.Helper()
	p, err := pipeline.New(testPipelineConfig(), []pipeline.Destination{&testkit.Recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		p.Close()
	})
	return ln.Addr().String()
}

// call makes one OTEP unary call over TLS with the given client configuration; on the own
// transport, which serves v1 only, a v1 Export.
func call(t *testing.T, addr string, tc *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if tlsTransport == TransportOwn {
		_, err := coltracev1.NewTraceServiceClient(conn).Export(ctx, &coltracev1.ExportTraceServiceRequest{})
		return err
	}
	resp, err := otepv1.NewUnaryExporterClient(conn).ExportTraces(ctx, &otepv1.TraceExportRequest{Id: 5})
	if err == nil && resp.Id != 5 {
		t.Fatalf("answer carries id %d", resp.Id)
	}
	return err
}

// tlsTransport is the transport TestTLSAndMutualTLS runs on, for call.
var tlsTransport string

// TLS and mutual TLS on both transports (ALPN h2 on otlpgate's own).
func TestTLSAndMutualTLS(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			tlsTransport = tr
			defer func() { tlsTransport = "" }()
			testTLSAndMutualTLS(t, tr)
		})
	}
}

func testTLSAndMutualTLS(t *testing.T, transport string) {
	p := newPKI(t)
	sc := DefaultConfig()
	sc.Transport = transport
	sc.TLSCert, sc.TLSKey = p.certFile, p.keyFile
	addr := startTLS(t, sc)
	if err := call(t, addr, &tls.Config{RootCAs: p.caPool}); err != nil {
		t.Fatalf("TLS call: %v", err)
	}
	if err := call(t, addr, &tls.Config{RootCAs: x509.NewCertPool()}); err == nil {
		t.Fatal("a client that does not trust the server's CA got through")
	}

	sc.TLSClientCA = p.caFile
	mtls := startTLS(t, sc)
	if err := call(t, mtls, &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.clientCert}}); err != nil {
		t.Fatalf("mTLS call with a client certificate: %v", err)
	}
	if err := call(t, mtls, &tls.Config{RootCAs: p.caPool}); err == nil {
		t.Fatal("mTLS call without a client certificate got through")
	}

	sc.TLSClientCA = p.otherCAFile
	strict := startTLS(t, sc)
	if err := call(t, strict, &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.clientCert}}); err == nil {
		t.Fatal("a client certificate from another CA got through")
	}

	for _, bad := range []Config{
		{Listen: "127.0.0.1:0", TLSCert: p.certFile, TLSKey: filepath.Join(p.dir, "missing.pem")},
		{Listen: "127.0.0.1:0", TLSCert: p.certFile, TLSKey: p.keyFile, TLSClientCA: p.keyFile},
	} {
		c := DefaultConfig()
		c.TLSCert, c.TLSKey, c.TLSClientCA = bad.TLSCert, bad.TLSKey, bad.TLSClientCA
		if _, err := New(c, nil, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("bad TLS files accepted: %+v", bad)
		}
	}
}
