package client

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"
)

// A destination keeps its latest failure for the people who run it: the status page shows it
// beside the counters, which say how often but not what the upstream said. Recording one costs
// a lock and the error value the failure already made; the message is formatted, and redacted,
// only when someone asks (LastError), so a failing upstream costs no string per failure.

// Failures that come without an error of their own.
var (
	errRejectedResult  = errors.New("client: the upstream answered FailedNoneRetryable")
	errRetryableResult = errors.New("client: the upstream answered FailedRetryable")
	errTooLarge        = errors.New("client: request larger than max-send-msg-size")
	errInvalidPayload  = errors.New("client: payload is not a v1 request body")
	errHTTPNotFound    = errors.New("HTTP 404")
)

// maxErrorMessage caps what LastError returns: an upstream's status message can be long.
const maxErrorMessage = 512

// lastError is a destination's latest failure.
type lastError struct {
	mu  sync.Mutex
	err error
	at  time.Time
}

// noteError records err as the destination's latest failure, unless the destination is
// stopping: its own cancellations say nothing of the upstream. Safe for concurrent use.
func (d *Dest) noteError(err error) {
	if err == nil || d.stopping() {
		return
	}
	now := time.Now()
	d.lastErr.mu.Lock()
	d.lastErr.err, d.lastErr.at = err, now
	d.lastErr.mu.Unlock()
}

// noteHTTPStatus records an HTTP answer that failed, with the message of its google.rpc.Status
// body, at most once a second: an upstream that refuses every request then costs one message
// a second, not one a request.
func (d *Dest) noteHTTPStatus(code int, body []byte) {
	if d.stopping() {
		return
	}
	now := time.Now()
	d.lastErr.mu.Lock()
	defer d.lastErr.mu.Unlock()
	if d.lastErr.err != nil && now.Sub(d.lastErr.at) < time.Second {
		return
	}
	// Redacted before it is kept, not only when shown: redactSecrets caps it too, and a cap
	// before the redaction could cut a token in two and leave its first half.
	d.lastErr.err, d.lastErr.at = fmt.Errorf("HTTP %d: %s", code, redactSecrets(statusMessage(body), d.secrets)), now
}

// LastError returns the message of the destination's latest failure (a gRPC status, a
// transport error, an HTTP status with the upstream's message, an ack timeout) and when it
// happened; "" and the zero time when nothing failed yet. The values of the destination's
// headers, its bearer token and the password of its endpoint are replaced by <redacted>, as
// RedactDest does for the -dest value. Safe for concurrent use.
func (d *Dest) LastError() (string, time.Time) {
	d.lastErr.mu.Lock()
	err, at := d.lastErr.err, d.lastErr.at
	d.lastErr.mu.Unlock()
	if err == nil {
		return "", time.Time{}
	}
	return d.upstreamMessage(err), at
}

// upstreamMessage is err as the status page and the log lines show it: a status's code and
// message (without grpc-go's "rpc error: code = ... desc =" wrapping), the destination's
// secrets redacted and the length capped. Every line that quotes an upstream goes through it
// or through redactSecrets: an upstream may echo the token or a header it was sent.
func (d *Dest) upstreamMessage(err error) string {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Code().String() + ": " + st.Message()
	}
	return redactSecrets(msg, d.secrets)
}

// secretsOf lists what a destination's errors must never show: header values (the bearer
// token among them, with and without its scheme) and the endpoint's password.
func secretsOf(cfg Config, headers []string) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); len(v) >= 3 { // shorter values would blank out ordinary words
			out = append(out, v)
		}
	}
	for _, v := range headers {
		add(v)
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			add(token)
		}
	}
	for _, v := range cfg.Headers {
		add(v)
	}
	if u, err := url.Parse(cfg.Endpoint); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	// Longest first: a token inside a longer header value is then replaced with it.
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if len(out[j]) > len(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// redactSecrets replaces every secret in msg and caps its length.
func redactSecrets(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "<redacted>")
	}
	if len(msg) > maxErrorMessage {
		msg = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "..."
	}
	return msg
}

// LastError returns the latest failure of any of the fleet's backends, prefixed with the
// backend's address, and when it happened; "" and the zero time when none failed. Safe for
// concurrent use.
func (f *Fleet) LastError() (string, time.Time) {
	f.mu.Lock()
	ds := make([]*Dest, 0, len(f.mu.members))
	for _, m := range f.mu.members {
		ds = append(ds, m.d)
	}
	f.mu.Unlock()
	var msg string
	var at time.Time
	for _, d := range ds {
		if m, t := d.LastError(); m != "" && t.After(at) {
			msg, at = "backend "+d.backend+": "+m, t
		}
	}
	return msg, at
}
