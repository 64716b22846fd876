package httpserver

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// cors answers browsers (the OpenTelemetry JS SDK in a page) for the origins the configuration
// allows. Without configured origins the server has no cors and sends no CORS header: a page
// cannot read an answer, which is the safe default.
type cors struct {
	exact     map[string]bool
	wild      []wildcard
	anyOrigin bool
	// headers are the request headers a preflight may ask for, lower case; anyHeader allows all.
	headers   []string
	anyHeader bool
	maxAge    string // seconds, empty to leave the header out
}

// wildcard matches origins that start with prefix and end with suffix, with at least one
// character between them.
type wildcard struct{ prefix, suffix string }

func newCORS(cfg Config) *cors {
	if len(cfg.CORSAllowedOrigins) == 0 {
		return nil
	}
	c := &cors{exact: map[string]bool{}, headers: []string{"content-type", "content-encoding"}}
	for _, o := range cfg.CORSAllowedOrigins {
		switch pre, suf, found := strings.Cut(o, "*"); {
		case o == "*":
			c.anyOrigin = true
		case found:
			c.wild = append(c.wild, wildcard{strings.ToLower(pre), strings.ToLower(suf)})
		default:
			c.exact[strings.ToLower(o)] = true
		}
	}
	for _, h := range cfg.CORSAllowedHeaders {
		if h = strings.TrimSpace(h); h == "*" {
			c.anyHeader = true
		} else if h != "" {
			c.headers = append(c.headers, strings.ToLower(h))
		}
	}
	if cfg.CORSMaxAge > 0 {
		c.maxAge = strconv.FormatInt(int64(cfg.CORSMaxAge.Seconds()), 10)
	}
	return c
}

// allowed reports whether a page from origin may read the answers. Origins are compared
// without regard to case: scheme and host are case-insensitive.
func (c *cors) allowed(origin []byte) bool {
	if len(origin) == 0 {
		return false
	}
	if c.anyOrigin {
		return true
	}
	var low [256]byte
	if len(origin) > len(low) {
		return false
	}
	o := low[:len(origin)]
	for i, ch := range origin {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		o[i] = ch
	}
	if c.exact[string(o)] {
		return true
	}
	for _, w := range c.wild {
		if len(o) > len(w.prefix)+len(w.suffix) && bytes.HasPrefix(o, []byte(w.prefix)) && bytes.HasSuffix(o, []byte(w.suffix)) {
			return true
		}
	}
	return false
}

// decorate adds the headers that let a page from an allowed origin read this answer, including
// Retry-After, which a browser hides from scripts unless exposed.
func (c *cors) decorate(ctx *fasthttp.RequestCtx, origin []byte) {
	h := &ctx.Response.Header
	h.SetBytesV("Access-Control-Allow-Origin", origin)
	h.Set("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Retry-After")
}

// preflight answers an OPTIONS request a browser sends before a cross-origin POST: 204 with the
// permissions when the origin, the method and every requested header are allowed, 403 without
// any CORS header otherwise (the browser then refuses to send). It reports false when the
// request is not a preflight at all.
func (c *cors) preflight(ctx *fasthttp.RequestCtx) bool {
	origin := ctx.Request.Header.Peek("Origin")
	method := ctx.Request.Header.Peek("Access-Control-Request-Method")
	if len(origin) == 0 || len(method) == 0 {
		return false
	}
	reqHeaders := ctx.Request.Header.Peek("Access-Control-Request-Headers")
	if !c.allowed(origin) || string(method) != fasthttp.MethodPost || !c.headersAllowed(reqHeaders) {
		ctr.rejected[rejectCORS].Inc()
		h := &ctx.Response.Header
		h.Del("Access-Control-Allow-Origin") // set by decorate for an allowed origin
		h.Del("Access-Control-Expose-Headers")
		ctx.SetStatusCode(fasthttp.StatusForbidden)
		return true
	}
	h := &ctx.Response.Header
	h.SetBytesV("Access-Control-Allow-Origin", origin)
	h.Set("Vary", "Origin")
	h.Set("Access-Control-Allow-Methods", fasthttp.MethodPost)
	if len(reqHeaders) > 0 {
		h.SetBytesV("Access-Control-Allow-Headers", reqHeaders)
	}
	if c.maxAge != "" {
		h.Set("Access-Control-Max-Age", c.maxAge)
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return true
}

// headersAllowed reports whether every header of a comma-separated
// Access-Control-Request-Headers value is allowed.
func (c *cors) headersAllowed(list []byte) bool {
	if c.anyHeader {
		return true
	}
	for len(list) > 0 {
		var name []byte
		if i := bytes.IndexByte(list, ','); i >= 0 {
			name, list = list[:i], list[i+1:]
		} else {
			name, list = list, nil
		}
		name = bytes.TrimSpace(name)
		if len(name) == 0 {
			continue
		}
		ok := false
		for _, h := range c.headers {
			if asciiEqualFold(name, h) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
