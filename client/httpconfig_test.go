package client

import (
	"strings"
	"testing"
)

// protocol=http: mode defaults to unary, the endpoint's scheme sets TLS, paths and
// compression parse, and the signal URIs follow the endpoint's base path.
func TestParseDestHTTP(t *testing.T) {
	base := DefaultConfig()
	c, err := ParseDest("name=be,endpoint=https://otlp.example.com/base,protocol=http,compression=gzip,concurrency=4,"+
		"metrics-path=/m,header=x-api-key:k1,bearer-token-file=/tok", base)
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.Name, want.Endpoint, want.Protocol, want.Mode, want.Compression, want.Concurrency =
		"be", "https://otlp.example.com/base", ProtocolHTTP, ModeUnary, "gzip", 4
	want.MetricsPath, want.BearerTokenFile = "/m", "/tok"
	want.Headers = map[string]string{"x-api-key": "k1"}
	want.TLS.Insecure = false
	if !configEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	uris := c.httpURIs()
	if got := strings.Join(uris[:], " "); got != "https://otlp.example.com/base/v1/traces https://otlp.example.com/m https://otlp.example.com/base/v1/logs" {
		t.Errorf("URIs %s", got)
	}

	plain, err := ParseDest("name=p,endpoint=http://127.0.0.1:4318/,protocol=http", base)
	if err != nil {
		t.Fatal(err)
	}
	if !plain.TLS.Insecure || plain.Mode != ModeUnary {
		t.Errorf("http:// endpoint: insecure %v mode %s", plain.TLS.Insecure, plain.Mode)
	}
	uris = plain.httpURIs()
	if got := strings.Join(uris[:], " "); got != "http://127.0.0.1:4318/v1/traces http://127.0.0.1:4318/v1/metrics http://127.0.0.1:4318/v1/logs" {
		t.Errorf("URIs %s", got)
	}
}

func TestParseDestHTTPErrors(t *testing.T) {
	base := DefaultConfig()
	for spec, want := range map[string]string{
		"name=a,endpoint=127.0.0.1:4318,protocol=http":                            "http://host:port",
		"name=a,endpoint=ftp://h:1,protocol=http":                                 "http://host:port",
		"name=a,endpoint=http://,protocol=http":                                   "no host",
		"name=a,endpoint=http://h:1/?x=1,protocol=http":                           "no user, query",
		"name=a,endpoint=http://u:p@h:1,protocol=http":                            "no user, query",
		"name=a,endpoint=https://h:1,protocol=http,insecure=true":                 "plaintext",
		"name=a,endpoint=http://h:1,protocol=http,tls-ca=/ca.pem":                 "use https://",
		"name=a,endpoint=http://h:1,protocol=http,mode=stream":                    "no streaming",
		"name=a,endpoint=http://h:1,protocol=http,compression=snappy":             "want gzip, zstd or none",
		"name=a,endpoint=http://h:1,protocol=http,traces-path=v1/traces":          "must start with /",
		"name=a,endpoint=http://h:1,protocol=http,logs-path=/l?x":                 "must start with /",
		"name=a,endpoint=http://h:1,protocol=http,header=content-type:text/plain": "set by the HTTP sender",
		"name=a,endpoint=http://h:1,protocol=http,header=host:evil":               "set by the HTTP sender",
		"name=a,endpoint=h:1,protocol=v1,mode=unary,traces-path=/t":               "for protocol http",
		"name=a,endpoint=h:1,protocol=h2":                                         "want otep, v1, http, file or kafka",
		"name=a,protocol=file":                                                    "path is required for protocol file",
		"name=a,protocol=file,path=/x,endpoint=h:1":                               "protocol file writes to path",
		"name=a,endpoint=h:1,path=/x":                                             "path is for protocol file",
	} {
		_, err := ParseDest(spec, base)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", spec, err, want)
		}
	}
	// A value with a line break would split the header block: Validate refuses it.
	c := DefaultConfig()
	c.Name, c.Endpoint, c.Protocol, c.Mode = "a", "http://h:1", ProtocolHTTP, ModeUnary
	c.Headers = map[string]string{"x-a": "1\r\nx-b: 2"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "line break") {
		t.Errorf("header with CRLF: %v", err)
	}
}

// An HTTP destination has no gRPC connection; New reads its token and TLS files like any
// other destination, and Shutdown of one never started returns at once.
func TestNewHTTP(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Endpoint, c.Protocol, c.Mode = "newhttp", "https://127.0.0.1:1", ProtocolHTTP, ModeUnary
	c.TLS = TLS{CAFile: "/nonexistent/ca.pem"}
	if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "tls-ca") {
		t.Errorf("missing CA file: %v", err)
	}
	c.Endpoint, c.TLS = "http://127.0.0.1:1", TLS{Insecure: true}
	c.BearerTokenFile = "/nonexistent/token"
	if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "bearer-token-file") {
		t.Errorf("missing token file: %v", err)
	}
	c.BearerTokenFile = ""
	d, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.conn != nil || d.http == nil {
		t.Fatal("HTTP destination built a gRPC connection")
	}
	if err := d.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
