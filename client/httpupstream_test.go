package client

import (
	"bytes"
	"crypto/tls"
	"io"
	"log"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"
)

// hit is one OTLP/HTTP request as the test upstream saw it.
type hit struct {
	n        int // 0-based arrival number
	path     string
	encoding string // Content-Encoding
	ctype    string
	auth     string
	tenant   string // x-tenant header
	orgID    string // x-scope-orgid header, "<none>" without one
	region   string // x-region header, "<none>" without one
	body     []byte // decompressed with the reference decoders, not the sender's codec
	tag      string // span name of a trace body's first entry
	at       time.Time
}

// httpUpstream is an OTLP/HTTP server for these tests, on 127.0.0.1. Every request is
// recorded, then answered by answer (nil: 200 with an empty protobuf body). Only the client's
// tests need an OTLP/HTTP upstream, so it lives here rather than in internal/testkit.
type httpUpstream struct {
	t    testing.TB
	url  string // http://127.0.0.1:port or https://
	addr string
	ln   net.Listener
	srv  *fasthttp.Server
	done chan struct{}

	stopOnce *sync.Once

	// answer writes the response to h; it may block (a slow upstream) or hijack the
	// connection to close it without an answer.
	answer func(h hit, ctx *fasthttp.RequestCtx)
	// record keeps each request (default); off, the upstream only answers, allocating
	// nothing per request (allocation tests and benchmarks).
	record bool

	mu      sync.Mutex
	hits    []hit
	changed chan struct{}
}

func newHTTPUpstream(t testing.TB, tlsCfg *tls.Config) *httpUpstream {
	t.Helper()
	u, err := serveHTTPUpstream(t, "127.0.0.1:0", tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// tryHTTPUpstream serves a plaintext upstream on addr, if it can listen there.
func tryHTTPUpstream(t testing.TB, addr string) (*httpUpstream, error) {
	return serveHTTPUpstream(t, addr, nil)
}

func serveHTTPUpstream(t testing.TB, addr string, tlsCfg *tls.Config) (*httpUpstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	u := &httpUpstream{record: true, t: t, addr: ln.Addr().String(), changed: make(chan struct{}), done: make(chan struct{})}
	u.url = "http://" + u.addr
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
		u.url = "https://" + u.addr
	}
	u.ln = ln
	u.srv = &fasthttp.Server{
		Handler: u.handle, MaxRequestBodySize: 64 << 20, CloseOnShutdown: true,
		Logger: log.New(io.Discard, "", 0), // failed handshakes are expected
	}
	go func() {
		defer close(u.done)
		u.srv.Serve(ln)
	}()
	var once sync.Once
	u.stopOnce = &once
	t.Cleanup(u.stop)
	return u, nil
}

// stop closes the listener and every connection; it may be called more than once.
func (u *httpUpstream) stop() {
	u.stopOnce.Do(func() {
		u.srv.Shutdown()
		u.ln.Close() // Shutdown misses a listener that Serve has not taken up yet
		<-u.done
	})
}

func (u *httpUpstream) handle(ctx *fasthttp.RequestCtx) {
	if !u.record {
		u.answer(hit{}, ctx)
		return
	}
	h := hit{
		path:     string(ctx.Path()),
		encoding: string(ctx.Request.Header.Peek("Content-Encoding")),
		ctype:    string(ctx.Request.Header.ContentType()),
		auth:     string(ctx.Request.Header.Peek("Authorization")),
		tenant:   string(ctx.Request.Header.Peek("X-Tenant")),
		orgID:    headerOrNone(ctx, "X-Scope-OrgID"),
		region:   headerOrNone(ctx, "X-Region"),
		at:       time.Now(),
	}
	body, err := decodeBody(h.encoding, ctx.Request.Body())
	if err != nil {
		u.t.Errorf("request %s: cannot decode a %q body: %v", h.path, h.encoding, err)
	}
	h.body = body
	h.tag = tagOf(body)
	u.mu.Lock()
	h.n = len(u.hits)
	u.hits = append(u.hits, h)
	close(u.changed)
	u.changed = make(chan struct{})
	answer := u.answer
	u.mu.Unlock()
	if answer == nil {
		ctx.SetContentType("application/x-protobuf")
		return
	}
	answer(h, ctx)
}

func decodeBody(enc string, b []byte) ([]byte, error) {
	var r io.Reader
	switch enc {
	case "":
		return append([]byte(nil), b...), nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, io.ErrUnexpectedEOF
	}
	return io.ReadAll(r)
}

// waitHits blocks until n requests arrived; the test fails after waitFor.
func (u *httpUpstream) waitHits(n int) []hit {
	u.t.Helper()
	deadline := time.After(waitFor)
	for {
		u.mu.Lock()
		got, ch := append([]hit(nil), u.hits...), u.changed
		u.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			u.t.Fatalf("timed out waiting for %d requests, got %d", n, len(got))
		}
	}
}

func (u *httpUpstream) received() []hit {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]hit(nil), u.hits...)
}

// httpConfig is a -dest for u with protocol=http, parsed as cmd/ would, over testConfig's
// short retry delays.
func httpConfig(t testing.TB, u *httpUpstream, extra string) Config {
	t.Helper()
	base := testConfig(t, "")
	spec := "name=" + base.Name + ",endpoint=" + u.url + ",protocol=http"
	if extra != "" {
		spec += "," + extra
	}
	cfg, err := ParseDest(spec, base)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// hijackClose closes the connection without answering, like a server that crashed mid-call.
func hijackClose(ctx *fasthttp.RequestCtx) {
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) { c.Close() })
}

// headerOrNone is the value of the request header name, "<none>" when the request has none.
func headerOrNone(ctx *fasthttp.RequestCtx, name string) string {
	if v := ctx.Request.Header.Peek(name); v != nil {
		return string(v)
	}
	return "<none>"
}
