package httpserver

import (
	"net/http"
	"testing"
	"time"
)

func TestCORS(t *testing.T) {
	sc := DefaultConfig()
	sc.CORSAllowedOrigins = []string{"https://app.example.com", "https://*.shop.example", "*.other.test"}
	sc.CORSAllowedHeaders = []string{"X-Tenant"}
	sc.CORSMaxAge = 10 * time.Minute
	e := start(t, testPipelineConfig(), sc, nil)
	preflight := func(origin, method, headers string) response {
		t.Helper()
		h := map[string]string{"Origin": origin, "Access-Control-Request-Method": method}
		if headers != "" {
			h["Access-Control-Request-Headers"] = headers
		}
		return e.do(t, http.MethodOptions, "/v1/traces", h, nil)
	}
	for _, tc := range []struct {
		origin, method, headers string
		ok                      bool
	}{
		{"https://app.example.com", "POST", "content-type", true},
		{"HTTPS://APP.EXAMPLE.COM", "POST", "Content-Type, Content-Encoding, x-tenant", true},
		{"https://a.shop.example", "POST", "", true},
		{"https://a.b.shop.example", "POST", "content-type", true},
		{"http://x.other.test", "POST", "content-type", true},
		{"https://shop.example", "POST", "content-type", false}, // the wildcard needs a subdomain
		{"https://app.example.com.evil", "POST", "content-type", false},
		{"http://app.example.com", "POST", "content-type", false}, // scheme differs
		{"https://app.example.com", "PUT", "content-type", false},
		{"https://app.example.com", "POST", "content-type, x-secret", false},
	} {
		r := preflight(tc.origin, tc.method, tc.headers)
		if !tc.ok {
			if r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%+v: %d, ACAO %q; want 403 without CORS headers", tc, r.status, r.header.Get("Access-Control-Allow-Origin"))
			}
			continue
		}
		h := r.header
		if r.status != 204 || h.Get("Access-Control-Allow-Origin") != tc.origin || h.Get("Access-Control-Allow-Methods") != "POST" ||
			h.Get("Access-Control-Allow-Headers") != tc.headers || h.Get("Access-Control-Max-Age") != "600" || h.Get("Vary") != "Origin" {
			t.Errorf("%+v: %d %v", tc, r.status, h)
		}
	}
	// The POST itself carries the origin back, and exposes Retry-After.
	r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Origin": "https://a.shop.example"}, traces(t, 1, 1))
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://a.shop.example" || r.header.Get("Access-Control-Expose-Headers") != "Retry-After" {
		t.Errorf("POST: %d %v", r.status, r.header)
	}
	// From an origin not allowed it is served (CORS binds browsers, not servers) but not readable.
	r = e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Origin": "https://evil.test"}, traces(t, 2, 1))
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("POST from another origin: %d %v", r.status, r.header)
	}
	// OPTIONS that is no preflight, with CORS on: 405 naming OPTIONS too.
	r = e.do(t, http.MethodOptions, "/v1/traces", nil, nil)
	if r.status != 405 || r.header.Get("Allow") != "POST, OPTIONS" {
		t.Errorf("plain OPTIONS: %d %v", r.status, r.header)
	}
}

func TestCORSAnyOriginAnyHeader(t *testing.T) {
	sc := DefaultConfig()
	sc.CORSAllowedOrigins = []string{"*"}
	sc.CORSAllowedHeaders = []string{"*"}
	e := start(t, testPipelineConfig(), sc, nil)
	r := e.do(t, http.MethodOptions, "/v1/logs", map[string]string{"Origin": "https://anything.test",
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-a, x-b"}, nil)
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://anything.test" ||
		r.header.Get("Access-Control-Allow-Headers") != "x-a, x-b" || r.header.Get("Access-Control-Max-Age") != "" {
		t.Errorf("%d %v", r.status, r.header)
	}
}

// Off by default: no CORS header anywhere, and a preflight is just a method not allowed.
func TestCORSOffByDefault(t *testing.T) {
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	r := e.do(t, http.MethodOptions, "/v1/traces", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}, nil)
	if r.status != 405 || r.header.Get("Allow") != "POST" || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight: %d %v", r.status, r.header)
	}
	r = e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Origin": "https://app.example.com"}, nil)
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("POST: %d %v", r.status, r.header)
	}
}

func TestConfigValidate(t *testing.T) {
	f := func(mod func(*Config), ok bool) {
		t.Helper()
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("%+v: %v", c, err)
		}
	}
	f(func(c *Config) {}, true)
	f(func(c *Config) { c.Listen = ""; c.MaxRequestBytes = -1 }, true)
	f(func(c *Config) { c.Listen = "nohost" }, false)
	f(func(c *Config) { c.TracesPath = "v1/traces" }, false)
	f(func(c *Config) { c.LogsPath = c.TracesPath }, false)
	f(func(c *Config) { c.MaxRequestBytes = 0 }, false)
	f(func(c *Config) { c.MaxHeaderBytes = 100 }, false)
	f(func(c *Config) { c.MaxConnections = 0 }, false)
	f(func(c *Config) { c.IdleTimeout = 0 }, false)
	f(func(c *Config) { c.TLSCert = "a" }, false)
	f(func(c *Config) { c.TLSClientCA = "a" }, false)
	f(func(c *Config) { c.CORSAllowedOrigins = []string{"https://*.*.x"} }, false)
	f(func(c *Config) { c.CORSAllowedOrigins = []string{""} }, false)
	f(func(c *Config) { c.CORSMaxAge = -time.Second }, false)
}
