package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// loadHTTP sends the templates as OTLP/HTTP POSTs to /v1/traces: cfg.InFlight workers, each
// with its own keep-alive connection and one request in flight, as OTLP/HTTP exporters send.
// A request counts as acknowledged on 200. 429, 502, 503 and 504 are retried as OTLP/HTTP
// exporters retry them (the specification's retryable codes): after Retry-After when the
// answer has one, else after a backoff from 5ms doubling to 1s, up to maxHTTPRetries times;
// the batch keeps its first send time, so the latency includes the waits. Any other answer
// fails the batch.
func loadHTTP(ctx context.Context, cfg LoadConfig, tmpl []template, pace <-chan time.Time) (LoadResult, error) {
	ct := "application/x-protobuf"
	if cfg.Protocol == "http-json" {
		ct = "application/json"
	}
	var hc *fasthttp.HostClient
	if cfg.Conns != nil {
		hc = cfg.Conns.http
	}
	if hc == nil {
		hc = &fasthttp.HostClient{
			Addr:                cfg.Target,
			MaxConns:            cfg.InFlight,
			MaxResponseBodySize: 64 << 10,
			ReadTimeout:         time.Minute,
			WriteTimeout:        time.Minute,
			MaxIdleConnDuration: time.Minute,
			// Bodies are sent as they are; no header is added that a real exporter would not send.
			NoDefaultUserAgentHeader: true,
		}
		if cfg.Conns != nil {
			cfg.Conns.http = hc
		} else {
			defer hc.CloseIdleConnections()
		}
	}
	// A kept client dialled for fewer workers lets the extra ones wait for a connection.
	hc.MaxConns = max(hc.MaxConns, cfg.InFlight)
	uri := "http://" + cfg.Target + "/v1/traces"
	var next, acked, failed, retried atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := range cfg.InFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker stamps its own copy: a request's bytes must not change while in flight.
			own := make([]template, len(tmpl))
			for i, t := range tmpl {
				own[i] = template{append([]byte(nil), t.b...), t.off, t.json}
			}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(uri)
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentType(ct)
			if v := cfg.headerValue(w); v != "" {
				req.Header.Set(cfg.Header, v)
			}
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(cfg.Batches) {
					return
				}
				if pace != nil {
					select {
					case <-pace:
					case <-ctx.Done():
						return
					}
				}
				t := own[i%int64(len(own))]
				t.stamp(time.Now().UnixNano())
				req.SetBodyRaw(t.b)
				err := hc.Do(req, resp)
				for backoff, n := 5*time.Millisecond, 0; err == nil && retryableHTTP(resp.StatusCode()) && n < maxHTTPRetries; n++ {
					d := backoff
					if ra, perr := strconv.Atoi(string(resp.Header.Peek("Retry-After"))); perr == nil && ra > 0 {
						d = time.Duration(ra) * time.Second
					}
					backoff = min(2*backoff, time.Second)
					retried.Add(1)
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return
					}
					err = hc.Do(req, resp)
				}
				if err == nil && resp.StatusCode() != fasthttp.StatusOK {
					err = fmt.Errorf("bench: HTTP %d: %s", resp.StatusCode(), httpErrorText(resp))
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	res := LoadResult{Sent: cfg.Batches, Acked: int(acked.Load()), Failed: int(failed.Load()), Retried: int(retried.Load())}
	if e := firstErr.Load(); e != nil {
		return res, *e
	}
	return res, ctx.Err()
}

// maxHTTPRetries bounds the retries of one batch, so that a receiver that never recovers ends
// the run with an error instead of hanging it.
const maxHTTPRetries = 100

// retryableHTTP reports the statuses OTLP/HTTP clients retry.
func retryableHTTP(status int) bool {
	switch status {
	case fasthttp.StatusTooManyRequests, fasthttp.StatusBadGateway, fasthttp.StatusServiceUnavailable, fasthttp.StatusGatewayTimeout:
		return true
	}
	return false
}

// httpErrorText is what an OTLP/HTTP error answer says: the message of the google.rpc.Status
// a protobuf answer carries, else the body as text, at most 200 bytes, quoted.
func httpErrorText(resp *fasthttp.Response) string {
	body := resp.Body()
	if strings.Contains(string(resp.Header.ContentType()), "protobuf") {
		var st spb.Status
		if proto.Unmarshal(body, &st) == nil && st.Message != "" {
			return fmt.Sprintf("%q (status code %d)", st.Message, st.Code)
		}
	}
	return fmt.Sprintf("%.200q", body)
}
