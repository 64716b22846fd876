package client

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// httpMetricsBody is a v1 metrics request with one gauge point whose metric is named tag.
func httpMetricsBody(tag string) []byte {
	req := &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{
		ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: []*metricsv1.Metric{{
			Name: tag,
			Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: []*metricsv1.NumberDataPoint{{
				TimeUnixNano: 1700000000000000000, Value: &metricsv1.NumberDataPoint_AsInt{AsInt: 42},
			}}}},
		}}}},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// httpLogsBody is a v1 logs request with one record whose event name is tag.
func httpLogsBody(tag string) []byte {
	req := &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{
		ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: []*logsv1.LogRecord{{
			TimeUnixNano: 1700000000000000000, SeverityNumber: logsv1.SeverityNumber_SEVERITY_NUMBER_INFO,
			EventName: tag,
		}}}},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// admit hands one request of sig to the feeder's pipeline as its own batch.
func (f *feeder) admit(sig fastpath.Signal, body []byte) {
	f.t.Helper()
	b, err := f.p.Admit(pipeline.Request{Signal: sig, Body: body, Items: 1})
	if err != nil {
		f.t.Fatalf("admit: %v", err)
	}
	f.mu.Lock()
	f.batches = append(f.batches, b)
	f.mu.Unlock()
}

// Every signal, with every compression, arrives at {endpoint}/v1/{signal} as exactly the
// bytes admitted, with the content type, the Content-Encoding of its compression (none
// without), the configured header and the bearer token.
func TestHTTPDeliversExactBytes(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, comp := range []string{"none", "gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			u := newHTTPUpstream(t, nil)
			d := startDest(t, httpConfig(t, u, "compression="+comp+",concurrency=1,header=x-tenant:acme,bearer-token-file="+token))
			f := newFeeder(t, d)
			bodies := [][]byte{traceBody("t-"+comp, 3, 200), httpMetricsBody("m-" + comp), httpLogsBody("l-" + comp)}
			for i, sig := range []fastpath.Signal{fastpath.Traces, fastpath.Metrics, fastpath.Logs} {
				f.admit(sig, bodies[i])
			}
			if ok := f.waitAll(); !allTrue(ok) {
				t.Fatalf("delivered %v", ok)
			}
			hits := u.received()
			if len(hits) != 3 {
				t.Fatalf("%d requests, want 3", len(hits))
			}
			wantEnc := comp
			if comp == "none" {
				wantEnc = ""
			}
			// Each signal has its own senders: the three requests may arrive in any order.
			byPath := map[string]hit{}
			for _, h := range hits {
				byPath[h.path] = h
			}
			for i, path := range []string{"/v1/traces", "/v1/metrics", "/v1/logs"} {
				h := byPath[path]
				if h.path != path || h.encoding != wantEnc || h.ctype != "application/x-protobuf" ||
					h.tenant != "acme" || h.auth != "Bearer t0ken" {
					t.Errorf("request %d: path %q encoding %q type %q tenant %q auth %q", i, h.path, h.encoding, h.ctype, h.tenant, h.auth)
				}
				if !bytes.Equal(h.body, bodies[i]) {
					t.Errorf("request %d (%s): body differs from the admitted bytes (%d vs %d bytes)", i, path, len(h.body), len(bodies[i]))
				}
			}
			if got := value(d.m.ackedRequests); got != 3 {
				t.Errorf("acknowledged %d, want 3", got)
			}
			if got := value(d.m.sentBytes); got != len(bodies[0])+len(bodies[1])+len(bodies[2]) {
				t.Errorf("sent bytes %d", got)
			}
		})
	}
}

// A base path in the endpoint is kept before /v1/{signal}; a signal path replaces it whole.
func TestHTTPPaths(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	cfg := httpConfig(t, u, "concurrency=1,logs-path=/ingest/otlp-logs")
	cfg.Endpoint += "/otlp/"
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.admit(fastpath.Traces, traceBody("p", 1, 1))
	f.admit(fastpath.Metrics, httpMetricsBody("p"))
	f.admit(fastpath.Logs, httpLogsBody("p"))
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	var paths []string
	for _, h := range u.received() {
		paths = append(paths, h.path)
	}
	sort.Strings(paths) // each signal has its own senders: any order
	if want := "/ingest/otlp-logs /otlp/v1/metrics /otlp/v1/traces"; strings.Join(paths, " ") != want {
		t.Errorf("paths %q, want %q", paths, want)
	}
}

// The specification's table, one status code after another on one destination: 429, 502,
// 503 and 504 are retried (twice each here, then answered 200), every other 4xx and 5xx, and
// a 3xx, drop the batch after exactly one attempt, counted as rejected. 404 says nothing is
// served at the path (unserved.go): the batch is kept and sent again after the backoff.
func TestHTTPStatusCodes(t *testing.T) {
	retryable := []int{429, 502, 503, 504}
	final := []int{400, 401, 403, 405, 408, 409, 413, 415, 500, 501, 505, 301}
	unserved := []int{404}
	u := newHTTPUpstream(t, nil)
	script := map[string][]int{} // tag -> the status of each attempt
	var tags []string
	for _, c := range retryable {
		tag := "r" + strconv.Itoa(c)
		script[tag] = []int{c, c, 200}
		tags = append(tags, tag)
	}
	for _, c := range final {
		tag := "f" + strconv.Itoa(c)
		script[tag] = []int{c, 200} // a second attempt would be answered, and caught below
		tags = append(tags, tag)
	}
	for _, c := range unserved {
		tag := "u" + strconv.Itoa(c)
		script[tag] = []int{c, 200}
		tags = append(tags, tag)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
		mu.Lock()
		n := attempts[h.tag]
		attempts[h.tag]++
		mu.Unlock()
		s := script[h.tag]
		code := s[min(n, len(s)-1)]
		ctx.SetStatusCode(code)
		ctx.SetContentType("application/x-protobuf")
		if code != 200 {
			ctx.SetBody([]byte{0x12, 0x04, 'n', 'o', 'p', 'e'}) // google.rpc.Status{message: "nope"}
		}
	}
	d := startDest(t, httpConfig(t, u, "concurrency=1"))
	f := newFeeder(t, d)
	for _, tag := range tags {
		f.admit(fastpath.Traces, traceBody(tag, 1, 1))
	}
	ok := f.waitAll()
	for i, tag := range tags {
		wantOK := tag[0] != 'f'
		want := 1
		switch tag[0] {
		case 'r':
			want = 3
		case 'u':
			want = 2
		}
		if ok[i] != wantOK || attempts[tag] != want {
			t.Errorf("%s: delivered %v after %d attempts, want %v after %d", tag, ok[i], attempts[tag], wantOK, want)
		}
	}
	if got := value(d.m.retried[RetryFailed]); got != 2*len(retryable)+len(unserved) {
		t.Errorf("retried %d, want %d", got, 2*len(retryable)+len(unserved))
	}
	if got := value(d.m.dropped[DropRejected]); got != len(final) {
		t.Errorf("dropped as rejected %d, want %d", got, len(final))
	}
	if got := value(d.m.droppedItems[DropRejected]); got != len(final) {
		t.Errorf("dropped items %d, want %d", got, len(final))
	}
	if got := value(d.m.ackedRequests); got != len(retryable)+len(unserved) {
		t.Errorf("acknowledged %d, want %d", got, len(retryable)+len(unserved))
	}
	if got := value(d.m.sentRequests); got != 3*len(retryable)+len(final)+2*len(unserved) {
		t.Errorf("sent %d", got)
	}
	if got := value(d.m.throttles); got != 0 {
		t.Errorf("%d throttles without Retry-After", got)
	}
}

// A connection closed without an answer, twice, is a transport error: retried, then delivered
// on the third attempt. A refused connection is retried until the upstream listens.
func TestHTTPTransportErrorsRetried(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	var mu sync.Mutex
	n := 0
	u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
		mu.Lock()
		n++
		first := n <= 2
		mu.Unlock()
		if first {
			hijackClose(ctx)
		}
	}
	d := startDest(t, httpConfig(t, u, "concurrency=1"))
	f := newFeeder(t, d)
	f.send(0, 1, 1, 10)
	if !f.wait(0) {
		t.Fatal("not delivered")
	}
	if hits := u.received(); len(hits) != 3 || hits[0].tag != "b0" || hits[2].tag != "b0" {
		t.Fatalf("%d attempts, want 3", len(hits))
	}
	if got := value(d.m.retried[RetryFailed]); got != 2 {
		t.Errorf("retried %d, want 2", got)
	}

	// Refused: nothing listens until the destination has retried twice.
	u2 := newHTTPUpstream(t, nil)
	u2.stop()
	cfg := httpConfig(t, u2, "concurrency=1")
	d2 := startDest(t, cfg)
	f2 := newFeeder(t, d2)
	f2.send(1, 1, 1, 10)
	deadline := time.Now().Add(waitFor)
	for value(d2.m.retried[RetryFailed]) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	u3 := listenHTTPAgain(t, u2.addr)
	if !f2.wait(0) {
		t.Fatal("not delivered once the upstream listened")
	}
	if hits := u3.received(); len(hits) != 1 || hits[0].tag != "b1" {
		t.Errorf("upstream got %d requests", len(hits))
	}
	if got := value(d2.m.dropped[DropRejected]) + value(d2.m.dropped[DropRetryExhausted]); got != 0 {
		t.Errorf("%d dropped", got)
	}
}

// A request that failed to reach the upstream (its connection refused, or broken before the
// answer) waits out its backoff (an hour here) only until the destination's next success: then
// it goes at once, ahead of what came after. Released once: failing again, it sleeps its
// backoff out whatever else succeeds. One worker, so that the order of the calls is fixed.
func TestHTTPOutageRetryReleasedBySuccess(t *testing.T) {
	down := newHTTPUpstream(t, nil)
	down.stop() // nothing listens: b0's connection is refused
	cfg := httpConfig(t, down, "concurrency=1")
	cfg.RetryInitial, cfg.RetryMax, cfg.RetryMaxElapsed = time.Hour, time.Hour, 0
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	retried := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(waitFor)
		for value(d.m.retried[RetryFailed]) != n {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.send(0, 1, 1, 10)
	retried("b0's connection to be refused", 1)
	u := listenHTTPAgain(t, down.addr)
	u.mu.Lock()
	u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
		if h.tag == "b2" { // every call of b2 breaks its connection without an answer
			hijackClose(ctx)
		}
	}
	u.mu.Unlock()
	f.send(1, 1, 1, 10)
	if got := f.waitAll(); !allTrue(got) {
		t.Fatalf("delivered %v, want both", got)
	}
	calls := func() []string {
		var tags []string
		for _, h := range u.received() {
			tags = append(tags, h.tag)
		}
		return tags
	}
	if got := calls(); !slices.Equal(got, []string{"b1", "b0"}) {
		t.Fatalf("calls %v, want b1, then b0, released by b1's success", got)
	}
	// b2's connection breaks; b3's success releases it; it breaks again and is not released
	// by b4's success: b5, sent after b4 was delivered, goes next, where a released b2 would
	// have gone first.
	f.send(2, 1, 1, 10)
	retried("b2's first call to break", 2)
	f.send(3, 1, 1, 10)
	if !f.wait(3) {
		t.Fatal("b3 not delivered")
	}
	retried("b2's second call to break", 3)
	for i := 4; i <= 5; i++ {
		f.send(i, 1, 1, 10)
		if !f.wait(i) {
			t.Fatalf("b%d not delivered", i)
		}
	}
	if got, want := calls(), []string{"b1", "b0", "b2", "b3", "b2", "b4", "b5"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	for _, h := range u.received() {
		if !bytes.Equal(h.body, f.body(h.tag)) {
			t.Errorf("call %d (%s): body differs from the admitted bytes", h.n, h.tag)
		}
	}
	// b2 still waits out its hour: the shutdown's deadline drops it, counted.
	if err := shutdown(t, d, 50*time.Millisecond); err == nil {
		t.Error("the shutdown left b2 in its backoff without a word")
	}
	if f.wait(2) {
		t.Error("b2 delivered")
	}
	if got := value(d.m.dropped[DropShutdownRetry]); got != 1 {
		t.Errorf("dropped waiting for a retry at shutdown %d, want 1 (b2)", got)
	}
	if got := value(d.m.retried[RetryFailed]); got != 3 {
		t.Errorf("retried %d, want 3", got)
	}
}

// listenHTTPAgain serves a fresh test upstream on addr, a port a stopped one held.
func listenHTTPAgain(t *testing.T, addr string) *httpUpstream {
	t.Helper()
	for range 200 {
		u, err := tryHTTPUpstream(t, addr)
		if err == nil {
			return u
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("cannot listen again on %s", addr)
	return nil
}

// Retry-After, in seconds and as an HTTP date, is a minimum before the next attempt and
// pauses the destination (a throttle, as RetryInfo is on gRPC).
func TestHTTPRetryAfter(t *testing.T) {
	for _, form := range []string{"seconds", "date"} {
		t.Run(form, func(t *testing.T) {
			u := newHTTPUpstream(t, nil)
			var mu sync.Mutex
			var until time.Time // the earliest moment the server allowed
			u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
				mu.Lock()
				defer mu.Unlock()
				if h.n > 0 {
					return
				}
				if form == "seconds" {
					until = h.at.Add(time.Second)
					ctx.Response.Header.Set("Retry-After", "1")
					ctx.SetStatusCode(http.StatusServiceUnavailable)
					return
				}
				// Dates have whole seconds: two seconds ahead, truncated, is at least one.
				date := h.at.Add(2 * time.Second).UTC().Truncate(time.Second)
				until = date
				ctx.Response.Header.Set("Retry-After", date.Format(http.TimeFormat))
				ctx.SetStatusCode(http.StatusTooManyRequests)
			}
			d := startDest(t, httpConfig(t, u, "concurrency=1"))
			f := newFeeder(t, d)
			f.send(0, 1, 1, 10)
			if !f.wait(0) {
				t.Fatal("not delivered")
			}
			hits := u.received()
			if len(hits) != 2 {
				t.Fatalf("%d attempts, want 2", len(hits))
			}
			mu.Lock()
			if hits[1].at.Before(until) {
				t.Errorf("retried at +%v, before the Retry-After allowed (+%v)", hits[1].at.Sub(hits[0].at), until.Sub(hits[0].at))
			}
			mu.Unlock()
			if got := value(d.m.throttles); got != 1 {
				t.Errorf("throttles %d, want 1", got)
			}
			if got := value(d.m.retried[RetryThrottled]); got != 1 {
				t.Errorf("throttled retries %d, want 1", got)
			}
		})
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f := func(in string, want time.Duration, wantOK bool) {
		t.Helper()
		got, ok := retryAfter([]byte(in), now)
		if got != want || ok != wantOK {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", in, got, ok, want, wantOK)
		}
	}
	f("", 0, false)
	f("0", 0, false)
	f("1", time.Second, true)
	f("120", 2*time.Minute, true)
	f("99999999999999999999999", maxRetryAfterSeconds*time.Second, true)
	f("-1", 0, false)
	f("1.5", 0, false)
	f("soon", 0, false)
	f("Sat, 01 Mar 2025 12:00:30 GMT", 30*time.Second, true) // IMF-fixdate
	f("Saturday, 01-Mar-25 12:01:00 GMT", time.Minute, true) // RFC 850
	f("Sat Mar  1 12:00:05 2025", 5*time.Second, true)       // asctime
	f("Sat, 01 Mar 2025 11:59:00 GMT", 0, false)             // past
}

// A 200 whose body carries partial_success counts the rejected items and delivers the batch
// (it is not retried); a JSON answer is not read as protobuf.
func TestHTTPPartialSuccess(t *testing.T) {
	resp, err := (&coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
		RejectedSpans: 7, ErrorMessage: "seven spans had no name",
	}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	u := newHTTPUpstream(t, nil)
	u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
		if h.tag == "b1" {
			ctx.SetContentType("application/json")
			ctx.SetBody(resp) // protobuf bytes under a JSON type: must not be counted
			return
		}
		ctx.SetContentType("application/x-protobuf")
		ctx.SetBody(resp)
	}
	d := startDest(t, httpConfig(t, u, "concurrency=1"))
	f := newFeeder(t, d)
	f.send(0, 2, 10, 10) // ten spans each: seven rejected is possible
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	if got := value(d.m.partialRejected); got != 7 {
		t.Errorf("partially rejected %d, want 7", got)
	}
	if n := len(u.received()); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

// No answer within ack-timeout: the request is sent again after the backoff, on another
// connection, and the second attempt is delivered; nothing is dropped.
func TestHTTPAckTimeout(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	release := make(chan struct{})
	defer close(release)
	var attempts atomic.Int32
	u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
		if attempts.Add(1) == 1 {
			<-release // the first attempt is never answered in time
		}
	}
	d := startDest(t, httpConfig(t, u, "concurrency=1,ack-timeout=1s"))
	f := newFeeder(t, d)
	f.send(0, 1, 1, 10)
	if !f.wait(0) {
		t.Fatal("not delivered")
	}
	if n := len(u.received()); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	if r, a := value(d.m.retried[RetryAckTimeout]), value(d.m.ackTimeouts); r != 1 || a != 1 {
		t.Errorf("retried after a timeout %d, ack timeouts %d; want 1, 1", r, a)
	}
	for reason, c := range d.m.dropped {
		if v := value(c); v != 0 {
			t.Errorf("dropped %d with reason %s", v, DropReason(reason))
		}
	}
}

// Shutdown waits for the answer of a call in flight; when its context ends first, the call is
// broken off and counted as shutdown_pending.
func TestHTTPShutdown(t *testing.T) {
	t.Run("waits", func(t *testing.T) {
		u := newHTTPUpstream(t, nil)
		release := make(chan struct{})
		u.answer = func(h hit, ctx *fasthttp.RequestCtx) { <-release }
		d := startDest(t, httpConfig(t, u, "concurrency=2"))
		f := newFeeder(t, d)
		f.send(0, 2, 1, 10)
		u.waitHits(2)
		errc := make(chan error, 1)
		go func() { errc <- shutdown(t, d, waitFor) }()
		close(release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		u := newHTTPUpstream(t, nil)
		release := make(chan struct{})
		defer close(release)
		u.answer = func(h hit, ctx *fasthttp.RequestCtx) { <-release }
		d := startDest(t, httpConfig(t, u, "concurrency=1"))
		f := newFeeder(t, d)
		f.send(0, 2, 1, 10)
		u.waitHits(1)
		if err := shutdown(t, d, 50*time.Millisecond); err == nil {
			t.Fatal("Shutdown reported no loss")
		}
		if ok := f.waitAll(); ok[0] || ok[1] {
			t.Fatalf("delivered %v", ok)
		}
		if got := value(d.m.dropped[DropShutdownPending]); got != 1 {
			t.Errorf("shutdown_pending %d, want 1", got)
		}
		if got := value(d.m.dropped[DropShutdownQueued]); got != 1 {
			t.Errorf("shutdown_queued %d, want 1", got)
		}
	})
}

// https:// with mutual TLS, the server name and a bearer token, read by the same code as for
// gRPC destinations; without the client certificate nothing is delivered.
func TestHTTPTLS(t *testing.T) {
	c := newCerts(t)
	u := newHTTPUpstream(t, &tls.Config{
		Certificates: []tls.Certificate{c.server}, ClientCAs: c.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	cfg := httpConfig(t, u, "concurrency=1,tls-ca="+c.caFile+",tls-cert="+c.clientCert+",tls-key="+c.clientKey+
		",tls-server-name=gateway.test,bearer-token-file="+c.tokenF)
	if cfg.TLS.Insecure {
		t.Fatal("https endpoint left TLS off")
	}
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 2, 1, 10)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	hits := u.received()
	if len(hits) != 2 || hits[0].auth != "Bearer s3cret" || !bytes.Equal(hits[1].body, f.body("b1")) {
		t.Fatalf("%d requests, auth %q", len(hits), hits[0].auth)
	}

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
	if got := value(d2.m.dropped[DropRetryExhausted]); got != 1 {
		t.Errorf("retry_exhausted %d, want 1", got)
	}
}
