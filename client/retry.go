package client

import (
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backoff is the delay before retry number n (n >= 1): RetryInitial doubled per retry up to
// RetryMax, then spread over [d/2, 3d/2) so that requests failed together do not come back
// together, and capped at RetryMax again. Safe for concurrent use.
func (c *Config) backoff(n int32) time.Duration {
	d := c.RetryInitial
	for i := int32(1); i < n && d < c.RetryMax; i++ {
		d *= 2
	}
	d = min(d, c.RetryMax)
	return min(d/2+time.Duration(rand.Int64N(int64(d)+1)), c.RetryMax)
}

// throttlePause is the pause after the n-th throttle in a row: the server's delay, doubled for
// each throttle since the last success, up to RetryMax (or the server's delay, if longer). The
// jitter only lengthens it: the server asked for at least delay.
func (c *Config) throttlePause(delay time.Duration, n int32) time.Duration {
	limit := max(c.RetryMax, delay)
	d := delay
	for i := int32(1); i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// verdict is what to do about a failed call or a stream that ended with an error.
type verdict uint8

const (
	verdictRetry    verdict = iota // transient: send again after a backoff
	verdictThrottle                // the server asked for a pause: send again after it
	verdictReject                  // sending again cannot help: drop
	// verdictUnserved: the upstream does not serve the call (UNIMPLEMENTED), whatever the
	// request holds: the destination is configured for what the upstream is not (unserved.go).
	// Send again after a backoff, as in an outage, until the configuration or the upstream is
	// fixed.
	verdictUnserved
)

// classify reads a gRPC error as the OTLP specification's table does: CANCELLED,
// DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE and DATA_LOSS are retryable;
// UNAVAILABLE and RESOURCE_EXHAUSTED with a RetryInfo are a throttle lasting its retry_delay;
// RESOURCE_EXHAUSTED without one, and every other code, are not retryable: INTERNAL among them,
// with or without a RetryInfo, which is what grpc-go and the Collector answer to a request
// they cannot decode (the specification's table says No, and the Collector's exporter reads
// RetryInfo for RESOURCE_EXHAUSTED only). A stream end
// (streamEnd) is more lenient: only the codes that say the call itself is refused (bad
// argument, unknown method, no credentials or permission, failed precondition, not found)
// reject, because anything else is the connection's fault rather than the requests'. A unary
// call's DEADLINE_EXCEEDED never gets here: the deadline is the ack timeout (unary.go).
// UNIMPLEMENTED is neither: the upstream does not serve the method at all (a Collector asked
// for otlpgate's OTEP service, a gateway without the logs pipeline), which no request can
// change and a configuration change fixes, so it is unserved: kept and sent again. Only a
// refused grpc-encoding is UNIMPLEMENTED about the request, and is rejected as before.
func classify(err error, streamEnd bool) (verdict, time.Duration) {
	if errors.Is(err, io.EOF) {
		return verdictRetry, 0
	}
	st := status.Convert(err)
	code := st.Code()
	if code == codes.Unimplemented && !encodingRefused(st.Message()) {
		return verdictUnserved, 0
	}
	if code == codes.Unavailable || code == codes.ResourceExhausted {
		if d, ok := retryDelay(st); ok {
			return verdictThrottle, d
		}
	}
	switch code {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange,
		codes.Unavailable, codes.DataLoss:
		return verdictRetry, 0
	case codes.InvalidArgument, codes.Unimplemented, codes.Unauthenticated,
		codes.PermissionDenied, codes.FailedPrecondition, codes.NotFound:
		return verdictReject, 0
	}
	if streamEnd {
		return verdictRetry, 0
	}
	return verdictReject, 0
}

// encodingRefused reports whether an UNIMPLEMENTED status's message is about the request's
// compression (grpc-go: "grpc: Decompressor is not installed for grpc-encoding", grpc-java:
// "Can't find decompressor for gzip") rather than the method.
func encodingRefused(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "grpc-encoding") || strings.Contains(m, "decompressor")
}

// retryDelay finds the RetryInfo of a status. A delay of zero or less is no throttle.
func retryDelay(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if dd := ri.GetRetryDelay().AsDuration(); dd > 0 {
				return dd, true
			}
		}
	}
	return 0, false
}
