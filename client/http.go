package client

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/rawio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// OTLP/HTTP: Concurrency workers, each with one POST in flight, share one fasthttp.HostClient
// that keeps up to Concurrency connections alive. A worker takes requests from the
// destination's queue like a unary worker (unary.go) and hands every outcome to the same
// deliver, drop, retry and throttle as the gRPC senders, so queue, retry budget, throttle,
// shutdown and metrics mean the same for every protocol. Only the reading of the answer
// differs, as the OTLP/HTTP specification's table says:
//
//	2xx                       delivered; a partial_success in the body counts its rejected items
//	429, 502, 503, 504        retried after the backoff; a Retry-After (seconds or HTTP date)
//	                          is a minimum and pauses the whole destination, like RetryInfo
//	every other status        dropped (reason rejected): the specification forbids a retry
//	no answer (refused, reset, connection closed before the answer)
//	                          retried after the backoff
//	no answer within AckTimeout
//	                          retried after the backoff, as a unary gRPC call; the timeout
//	                          covers the whole exchange here (fasthttp has no hook between
//	                          writing the request and reading the answer)
//
// fasthttp rather than net/http: its Request and Response are reusable values, the body is
// sent from the payload's own bytes (SetBodyRaw) and the answer is read into a buffer the
// Response keeps, so a request costs no allocation once the worker is warm
// (http_alloc_test.go). Its own retries are off: a POST is not idempotent, and re-sending is
// this package's business.

// httpMaxIdleConn is how long an idle kept-alive connection stays open; below the idle
// timeouts common servers and load balancers use (60s and more), so that the client, not the
// server, closes it and a request never goes out on a connection the server is closing.
const httpMaxIdleConn = 30 * time.Second

var (
	errHTTPStopped = errors.New("client: destination stopped, no new connection")
)

// httpSender is the part of a destination that speaks OTLP/HTTP. Built by New, shared by the
// workers; safe for concurrent use.
type httpSender struct {
	hc       *fasthttp.HostClient
	uris     [fastpath.NumSignals]string
	headers  [][2]string         // header= entries and the bearer token, sent on every request
	comp     encoding.Compressor // nil: the body goes as it is
	encoding string              // Content-Encoding of comp

	rejectLog everySecond // the rate limit on the refusal lines

	// conns are the open connections, so that Shutdown can break the calls in flight once
	// it stops waiting: fasthttp calls take no context.
	conns struct {
		sync.Mutex
		set     map[*trackedConn]struct{}
		stopped bool
	}
}

func newHTTPSender(cfg Config) (*httpSender, error) {
	s := &httpSender{uris: cfg.httpURIs()}
	s.conns.set = map[*trackedConn]struct{}{}
	u, _ := url.Parse(cfg.Endpoint) // Validate parsed it
	for k, v := range cfg.Headers {
		s.headers = append(s.headers, [2]string{k, v})
	}
	auth, err := cfg.authorization()
	if err != nil {
		return nil, err
	}
	if auth != "" {
		s.headers = append(s.headers, [2]string{"authorization", auth})
	}
	if c := cfg.compressor(); c != "" {
		s.comp, s.encoding = encoding.GetCompressor(c), c // New checked it is registered
	}
	addr := u.Host
	if u.Port() == "" {
		addr = fasthttp.AddMissingPort(addr, u.Scheme == "https")
	}
	s.hc = &fasthttp.HostClient{
		Addr:                      addr,
		Name:                      "otlpgate",
		IsTLS:                     u.Scheme == "https",
		MaxConns:                  cfg.Concurrency * int(fastpath.NumSignals), // concurrency workers per signal
		MaxIdleConnDuration:       httpMaxIdleConn,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		// An Export*ServiceResponse or a google.rpc.Status is a few hundred bytes, but a
		// partial success may quote much: a body up to max-recv-msg-size is read. A larger one
		// is not read at all (the connection is closed instead); the status code still decides
		// (answer.go).
		MaxResponseBodySize: cfg.MaxRecvMsgSize,
		ReadBufferSize:      16 << 10, // response headers; a larger header block fails the call
		DialTimeout:         s.dial,
		// Paths are sent as configured; the upstream's router decides what they mean.
		DisablePathNormalizing: true,
	}
	if !cfg.TLS.Insecure {
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, err
		}
		s.hc.TLSConfig = tc
	}
	return s, nil
}

// dialError marks a failure to connect: nothing was sent, so a retry is always safe.
type dialError struct{ err error }

func (e *dialError) Error() string { return "client: cannot connect: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dial opens a connection and tracks it until it closes. fasthttp wraps it in TLS itself.
func (s *httpSender) dial(addr string, timeout time.Duration) (net.Conn, error) {
	s.conns.Lock()
	stopped := s.conns.stopped
	s.conns.Unlock()
	if stopped {
		return nil, errHTTPStopped
	}
	c, err := (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).Dial("tcp", addr)
	if err != nil {
		return nil, &dialError{err}
	}
	tc := &trackedConn{Conn: rawio.Wrap(c), s: s}
	s.conns.Lock()
	defer s.conns.Unlock()
	if s.conns.stopped { // abort ran while this dial was under way
		c.Close()
		return nil, errHTTPStopped
	}
	s.conns.set[tc] = struct{}{}
	return tc, nil
}

// abort refuses new connections and closes the open ones, so that every call in flight
// returns at once. Shutdown calls it once it stopped waiting for answers.
func (s *httpSender) abort() {
	s.conns.Lock()
	s.conns.stopped = true
	open := make([]*trackedConn, 0, len(s.conns.set))
	for c := range s.conns.set {
		open = append(open, c)
	}
	s.conns.Unlock()
	for _, c := range open {
		c.Close()
	}
	s.hc.CloseIdleConnections()
}

// trackedConn removes itself from its sender's set when closed.
type trackedConn struct {
	net.Conn
	s    *httpSender
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.conns.Lock()
		delete(c.s.conns.set, c)
		c.s.conns.Unlock()
	})
	return c.Conn.Close()
}

// httpWorker is one OTLP/HTTP sender. Its fields belong to its goroutine.
type httpWorker struct {
	d     *Dest
	sig   fastpath.Signal // the signal whose queue the worker serves
	s     *httpSender
	timer *time.Timer
	// reqs are prepared once per signal (method, URI, headers); a send only sets the body.
	reqs [fastpath.NumSignals]fasthttp.Request
	resp fasthttp.Response
	out  bufWriter // the compressed body, in a pooled buffer for the time of one call
}

func newHTTPWorker(d *Dest, sig fastpath.Signal) *httpWorker {
	w := &httpWorker{d: d, sig: sig, s: d.http, timer: stoppedTimer()}
	for i := range w.reqs {
		req := &w.reqs[i]
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(w.s.uris[i])
		req.Header.SetContentType("application/x-protobuf")
		if w.s.encoding != "" {
			req.Header.Set(fasthttp.HeaderContentEncoding, w.s.encoding)
		}
		for _, h := range w.s.headers {
			req.Header.Set(h[0], h[1])
		}
	}
	return w
}

func (w *httpWorker) run() {
	defer w.d.wg.Done()
	for {
		r := w.d.next(w.sig, w.timer)
		if r == nil {
			return
		}
		w.call(r)
	}
}

// call POSTs r once and acts on the outcome.
func (w *httpWorker) call(r *request) {
	d := w.d
	if r.sig >= fastpath.NumSignals {
		d.drop(r, DropInvalid)
		return
	}
	if !d.sendsAsIs(r.b) {
		d.drop(r, DropInvalid)
		return
	}
	// The upstream checks the decompressed body against its limit (the Collector does).
	if r.b.PlainLen() > d.cfg.MaxSendMsgSize {
		d.drop(r, DropTooLarge)
		return
	}
	if !d.waitPause(w.timer) { // a throttle may have come since next returned r
		d.lose(r)
		return
	}
	req := &w.reqs[r.sig]
	if len(d.cfg.ForwardHeaders) > 0 {
		d.setForwarded(&req.Header, r.b.Tenant)
	}
	body := r.b.Payload.Bytes() // r holds the payload reference until it is finished
	// A pass-through batch is already compressed the way the worker sends (fastpath takes it
	// for this destination only then, Dest.PassThrough): its bytes go as they are.
	if w.s.comp != nil && r.b.Encoding == pipeline.EncodingNone {
		var err error
		if body, err = w.compress(body); err != nil {
			w.out.release()
			d.drop(r, DropInvalid)
			return
		}
	}
	req.SetBodyRaw(body)
	r.attempt++
	r.sentAt = nanotime()
	d.sending.Add(1)
	d.m.sentRequests.Inc()
	d.m.sentBytes.Add(float64(r.b.PlainLen())) // before compression, a pass-through batch's too

	err := w.s.hc.DoTimeout(req, &w.resp, d.cfg.AckTimeout)
	req.SetBodyRaw(nil) // the body's bytes go back to their owners below
	w.out.release()
	d.sending.Add(-1)

	switch {
	case err == nil || errors.Is(err, fasthttp.ErrBodyTooLarge):
		// An answer came; ErrBodyTooLarge leaves its header read and its body unread.
		d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
		w.answer(r, err == nil)
	case d.stopping() && d.handback.Load() != nil:
		d.lose(r) // a reload's Handover broke the call: the replacement sends it
	case d.stopping():
		d.drop(r, DropShutdownPending)
	case errors.Is(err, fasthttp.ErrTimeout):
		// fasthttp closes the connection of a timed-out request, so a late answer cannot be
		// read as the next request's; the request goes again on another.
		d.noteError(errAckTimeout)
		d.m.ackTimeouts.Inc()
		d.retry(r, RetryAckTimeout)
	default: // could not connect, reset, closed before the answer: nothing says it arrived
		d.noteError(err)
		d.retryOutage(r)
	}
	w.resp.Reset()
}

// answer acts on the status of a response; withBody is false when the body was over the cap.
func (w *httpWorker) answer(r *request, withBody bool) {
	d := w.d
	code := w.resp.StatusCode()
	switch {
	case code >= 200 && code < 300:
		if !withBody {
			d.unreadableAnswer(r, "HTTP "+strconv.Itoa(code)+" with a body of "+strconv.Itoa(w.resp.Header.ContentLength())+" bytes")
			return
		}
		if w.protobufAnswer() {
			d.partial(r, w.resp.Body())
		}
		d.deliver(r)
	case code == fasthttp.StatusTooManyRequests, code == fasthttp.StatusBadGateway,
		code == fasthttp.StatusServiceUnavailable, code == fasthttp.StatusGatewayTimeout:
		d.noteHTTPStatus(code, w.resp.Body())
		if delay, ok := retryAfter(w.resp.Header.Peek(fasthttp.HeaderRetryAfter), time.Now()); ok {
			d.throttle(delay)
			d.retryAfterPause(r)
			return
		}
		d.retry(r, RetryFailed)
	case code == fasthttp.StatusNotFound:
		// Nothing there to take any request: a configuration error, not a bad batch.
		cause := errHTTPNotFound
		if msg := statusMessage(w.resp.Body()); msg != "" {
			cause = fmt.Errorf("%w: %s", errHTTPNotFound, msg)
		}
		d.notServed(r.sig, cause)
		d.retry(r, RetryFailed)
	default:
		d.noteHTTPStatus(code, w.resp.Body())
		// The count is in the metric; the log says why, at most once a second, so that an
		// upstream refusing everything (a wrong token) does not flood it. The line comes
		// before the drop is reported, so whoever sees the request fail finds it.
		if w.s.rejectLog.allow() {
			d.log.Warn("upstream rejected a batch", "status", code, "message", redactSecrets(statusMessage(w.resp.Body()), d.secrets))
		}
		d.drop(r, DropRejected)
	}
}

// protobufAnswer reports whether the response body can be read as protobuf: a JSON or
// compressed body would read as garbage counts. A missing Content-Type is read (fasthttp
// reports it as text/plain), since readPartialSuccess counts nothing in what it cannot parse.
func (w *httpWorker) protobufAnswer() bool {
	return len(w.resp.Header.ContentEncoding()) == 0 && !bytes.Contains(w.resp.Header.ContentType(), []byte("json"))
}

// compress writes body, compressed, into the worker's pooled buffer; the result is valid until
// w.out.release.
func (w *httpWorker) compress(body []byte) ([]byte, error) {
	// Compressed telemetry is smaller than its input; the margin covers incompressible bodies
	// (headers and stored blocks) so that the buffer never grows during the write.
	w.out.b = pool.GetBytes(len(body) + len(body)/64 + 1024)
	zw, err := w.s.comp.Compress(&w.out)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(body); err != nil {
		zw.Close()
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return *w.out.b, nil
}

// bufWriter appends to a pooled buffer.
type bufWriter struct{ b *[]byte }

var _ io.Writer = (*bufWriter)(nil)

func (w *bufWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

func (w *bufWriter) release() {
	if w.b != nil {
		pool.PutBytes(w.b)
		w.b = nil
	}
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date (the three forms of
// RFC 9110). A missing, malformed, zero or past value is no delay.
func retryAfter(v []byte, now time.Time) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var secs int64
		for _, c := range v {
			if c < '0' || c > '9' {
				return 0, false
			}
			secs = secs*10 + int64(c-'0')
			if secs > maxRetryAfterSeconds {
				secs = maxRetryAfterSeconds
			}
		}
		return time.Duration(secs) * time.Second, secs > 0
	}
	t, err := http.ParseTime(string(v))
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return min(d, maxRetryAfterSeconds*time.Second), true
}

// maxRetryAfterSeconds bounds a Retry-After before it becomes a duration (which would
// overflow past 292 years). The retry budget (RetryMaxElapsed) drops a request whose pause
// outlasts it long before this.
const maxRetryAfterSeconds = 1 << 30

// statusMessage returns the message of a google.rpc.Status body (field 2), for the log line of
// a rejected batch and the last error; "" when the body is not one. It is not cut: the callers
// redact it first (redactSecrets, which caps it), since a cut could halve a token the upstream
// echoed and leave the half unredacted. They run at most once a second.
func statusMessage(body []byte) string {
	var m []byte
	for b := body; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		if num == 2 && typ == protowire.BytesType {
			m, _ = protowire.ConsumeBytes(b)
		}
		b = b[n:]
	}
	return string(m)
}
