package client

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The two -dest examples of the design, and every key, parse to the expected Config.
func TestParseDest(t *testing.T) {
	base := DefaultConfig()
	gw, err := ParseDest("name=gw,endpoint=10.0.0.5:4317,protocol=otep,mode=stream,streams=4,window=64", base)
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.Name, want.Endpoint, want.Protocol, want.Mode, want.Streams, want.Window = "gw", "10.0.0.5:4317", "otep", "stream", 4, 64
	want.Transport = TransportOtlpgate // the default for a host:port endpoint
	if !configEqual(gw, want) {
		t.Errorf("gw = %+v", gw)
	}
	be, err := ParseDest("name=backend,endpoint=collector:4317,protocol=v1,mode=unary,concurrency=8,compression=zstd", base)
	if err != nil {
		t.Fatal(err)
	}
	want = base
	want.Name, want.Endpoint, want.Protocol, want.Mode, want.Concurrency, want.Compression =
		"backend", "collector:4317", "v1", "unary", 8, "zstd"
	want.Transport = TransportOtlpgate
	if !configEqual(be, want) {
		t.Errorf("backend = %+v", be)
	}

	all, err := ParseDest(strings.Join([]string{
		"name=x", "endpoint=dns:///gw.example:4317", "queue-bytes=64MiB", "ack-timeout=30s",
		"retry.initial=100ms", "retry-max=2s", "retry.max-elapsed=1m", "rebalance-timeout=90s",
		"rebalance-requests=500", "retry-on-reconnect=false", "wait-on-shutdown=false",
		"tls-ca=/ca.pem", "tls-cert=/c.pem", "tls-key=/k.pem", "tls-server-name=gw",
		"http2-stream-window=2MiB", "http2-conn-window=16MiB", "max-send-msg-size=8MiB", "max-recv-msg-size=1MiB",
		"write-buffer=1MiB", "read-buffer=64KiB", "zero-buffers=true",
		"keepalive-time=1m", "keepalive-timeout=5s", "header=X-Tenant: a", "header=x-env:prod",
		"bearer-token-file=/tok",
	}, ","), base)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"endpoint", all.Endpoint == "dns:///gw.example:4317"},
		{"queue-bytes", all.QueueBytes == 64<<20},
		{"ack-timeout", all.AckTimeout == 30*time.Second},
		{"retry", all.RetryInitial == 100*time.Millisecond && all.RetryMax == 2*time.Second && all.RetryMaxElapsed == time.Minute},
		{"rebalance", all.RebalanceTimeout == 90*time.Second && all.RebalanceRequests == 500},
		{"booleans", !all.RetryOnReconnect && !all.WaitOnShutdown},
		{"tls", !all.TLS.Insecure && all.TLS.CAFile == "/ca.pem" && all.TLS.CertFile == "/c.pem" && all.TLS.KeyFile == "/k.pem" && all.TLS.ServerName == "gw"},
		{"windows", all.InitialWindowSize == 2<<20 && all.InitialConnWindowSize == 16<<20},
		{"max-send", all.MaxSendMsgSize == 8<<20},
		{"max-recv", all.MaxRecvMsgSize == 1<<20},
		{"buffers", all.WriteBufferSize == 1<<20 && all.ReadBufferSize == 64<<10 && all.ZeroBuffers},
		{"keepalive", all.KeepaliveTime == time.Minute && all.KeepaliveTimeout == 5*time.Second},
		{"headers", len(all.Headers) == 2 && all.Headers["x-tenant"] == "a" && all.Headers["x-env"] == "prod"},
		{"token", all.BearerTokenFile == "/tok"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s not parsed: %+v", c.name, all)
		}
	}
	if base.Headers != nil {
		t.Error("ParseDest wrote into the base config's headers")
	}
}

func configEqual(a, b Config) bool {
	return reflect.DeepEqual(a, b)
}

func TestParseDestErrors(t *testing.T) {
	base := DefaultConfig()
	for spec, want := range map[string]string{
		"name=a,endpoint=h:1,colour=blue":                   `key "colour" is unknown`,
		"name=a,endpoint=h:1,streams=x":                     `key "streams": bad value "x"`,
		"name=a,endpoint=h:1,queue-bytes=12XB":              `key "queue-bytes"`,
		"name=a,endpoint=h:1,queue-bytes=-1":                `key "queue-bytes"`,
		"name=a,name=b,endpoint=h:1":                        `key "name" given twice`,
		"name=a,endpoint":                                   "is not key=value",
		"name=a,endpoint=h:1,protocol=v1,mode=stream":       "no streaming service",
		"name=a,endpoint=h:1,tls=false,tls-ca=/ca.pem":      "plaintext",
		"name=a,endpoint=h:1,tls-cert=/c.pem":               "both tls-cert and tls-key",
		"name=a,endpoint=nohostport":                        "not host:port",
		"endpoint=h:1":                                      "name is required",
		"name=a,endpoint=h:1,compression=lz4":               "compression",
		"name=a,endpoint=h:1,window=0":                      "window 0",
		"name=a,endpoint=h:1,retry-initial=2s,retry-max=1s": "retry max",
		"name=a,endpoint=h:1,header=novalue":                `key "header"`,
		"name=a,endpoint=h:1,header=grpc-x:1":               "reserved",
		"name=a,endpoint=h:1,keepalive-time=1s":             "keepalive time",
		"name=a,endpoint=h:1,http2-stream-window=1KiB":      "64KiB",
		"name=a,endpoint=h:1,max-send-msg-size=3GiB":        `key "max-send-msg-size"`,
	} {
		_, err := ParseDest(spec, base)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", spec, err, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	f := func(in string, want int64) {
		t.Helper()
		got, err := parseSize(in, 1<<62)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	f("0", 0)
	f("1000", 1000)
	f("4KiB", 4<<10)
	f("64MiB", 64<<20)
	f("2GiB", 2<<30)
	f("3MB", 3e6)
	f("7B", 7)
	f("5 MiB", 5<<20)
	if _, err := parseSize("5TiB", 1<<62); err == nil {
		t.Error("5TiB accepted")
	}
	if _, err := parseSize("3GiB", 1<<31-1); err == nil {
		t.Error("3GiB accepted above a 2GiB limit")
	}
}

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Endpoint = "x", "127.0.0.1:4317"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// The client must re-balance before the server's defaults end the stream.
	if c.RebalanceTimeout >= 15*time.Minute || c.RebalanceRequests >= 1_000_000 {
		t.Error("rebalance defaults not below the server's stream limits")
	}
	d, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.conn.Close() // never started: the idle connection is all there is to stop
}

// New reads the files a destination names, and fails on those it cannot read.
func TestNewReadsFiles(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Endpoint = "x", "127.0.0.1:4317"
	c.TLS = TLS{CAFile: "/nonexistent/ca.pem"}
	if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "tls-ca") {
		t.Errorf("missing CA file: %v", err)
	}
	c.TLS = TLS{Insecure: true}
	c.BearerTokenFile = "/nonexistent/token"
	if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "bearer-token-file") {
		t.Errorf("missing token file: %v", err)
	}
}

func TestRedactDest(t *testing.T) {
	for in, want := range map[string]string{
		"name=a,endpoint=h:1": "name=a,endpoint=h:1",
		"name=a,header=authorization:Bearer s3cret,mode=unary":      "name=a,header=authorization:<redacted>,mode=unary",
		"name=a,header=x-key:a,b,c,header=k:v2":                     "name=a,header=x-key:<redacted>,<redacted>,<redacted>,header=k:<redacted>",
		"header=x-key:one, two:three,name=a":                        "header=x-key:<redacted>,<redacted>,name=a",
		"name=a,endpoint=https://h:443/v1,protocol=http,header=k:v": "name=a,endpoint=https://h:443/v1,protocol=http,header=k:<redacted>",
		"name=a,header=x-api-key=s3cret":                            "name=a,header=<redacted>:<redacted>",
		"name=a,header=s3cret":                                      "name=a,header=<redacted>:<redacted>",
	} {
		if got := RedactDest(in); got != want {
			t.Errorf("RedactDest(%q) = %q, want %q", in, got, want)
		}
	}
	// Nor one written with the wrong separator.
	if _, err := ParseDest("name=a,endpoint=h:1,header=x-api-key=s3cret", DefaultConfig()); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("ParseDest error: %v", err)
	}
	// A parse error never quotes a header value, even one cut at a comma.
	_, err := ParseDest("name=a,endpoint=h:1,protocol=v1,mode=unary,header=k:s3cret,tail", DefaultConfig())
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "tail") {
		t.Errorf("ParseDest error: %v", err)
	}
}

// Without protocol and mode keys a destination speaks standard OTLP: v1 unary for host:port,
// OTLP/HTTP for an http:// or https:// endpoint; protocol=otep streams unless told otherwise.
func TestParseDestDefaults(t *testing.T) {
	f := func(spec, protocol, mode string) {
		t.Helper()
		c, err := ParseDest(spec, DefaultConfig())
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if c.Protocol != protocol || c.Mode != mode {
			t.Errorf("%q: protocol %q, mode %q; want %q, %q", spec, c.Protocol, c.Mode, protocol, mode)
		}
	}
	f("name=a,endpoint=collector:4317", ProtocolV1, ModeUnary)
	f("name=a,endpoint=dns:///collector:4317", ProtocolV1, ModeUnary)
	f("name=a,endpoint=http://collector:4318", ProtocolHTTP, ModeUnary)
	f("name=a,endpoint=HTTPS://otlp.example.com/base", ProtocolHTTP, ModeUnary)
	f("name=a,endpoint=gw:4317,protocol=otep", ProtocolOTEP, ModeStream)
	f("name=a,endpoint=gw:4317,protocol=otep,mode=unary", ProtocolOTEP, ModeUnary)
	f("name=a,resolver=static,endpoints=gw1:4317|gw2:4317", ProtocolV1, ModeUnary)
}

// header-file=key:/path sends the file's content, trimmed, as the header's value, read each
// time the destination is read (a -dest.file reload included); a file that cannot be read is
// an error naming the path, never a value.
func TestParseDestHeaderFile(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte(" Basic dXNlcjpwdw==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseDest("name=a,endpoint=h:1,header-file=Authorization:"+key+",header=x-tenant:t1", DefaultConfig())
	if err != nil || len(c.Headers) != 2 || c.Headers["authorization"] != "Basic dXNlcjpwdw==" || c.Headers["x-tenant"] != "t1" {
		t.Fatalf("%v: %v", c.Headers, err)
	}
	if err := os.WriteFile(key, []byte("Basic cm90YXRlZA=="), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := ParseDest("name=a,endpoint=h:1,header-file=authorization:"+key, DefaultConfig()); err != nil || c.Headers["authorization"] != "Basic cm90YXRlZA==" {
		t.Errorf("read again: %v, %v", c.Headers, err)
	}
	missing := filepath.Join(dir, "none")
	for spec, want := range map[string]string{
		"name=a,endpoint=h:1,header-file=x-key:" + missing: `key "header-file": bad value "x-key:` + missing + `": open ` + missing,
		"name=a,endpoint=h:1,header-file=x-key":            "want key:/path/to/file",
	} {
		if _, err := ParseDest(spec, DefaultConfig()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", spec, err, want)
		}
	}
}
