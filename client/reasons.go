package client

// DropReason says why a destination gave a request up for good, its batch finished with
// Done(false). Its String is the reason label of otlpgate_client_dropped_requests_total and
// otlpgate_client_dropped_items_total: dashboards, alert rules (deploy/) and docs/metrics.md
// name these values, so they never change; a new reason gets a new value.
type DropReason uint8

// Why a request was dropped.
const (
	DropRejected        DropReason = iota // FailedNoneRetryable, or a status that retrying cannot fix
	DropAckTimeout                        // no answer within AckTimeout, with RetryOnReconnect off
	DropRetryExhausted                    // still failing RetryMaxElapsed after the destination took it
	DropStreamBroken                      // pending on a stream that broke, with RetryOnReconnect off
	DropTooLarge                          // larger than MaxSendMsgSize
	DropInvalid                           // the payload is not a v1 body (cannot be framed)
	DropShutdownQueued                    // still queued (never sent) when Shutdown gave up
	DropShutdownPending                   // sent, not yet answered, when Shutdown gave up
	DropShutdownRetry                     // waiting for a retry or re-send when Shutdown gave up
	DropStreamPoison                      // alone on PoisonAfter streams that each ended with INTERNAL
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	"rejected", "ack_timeout", "retry_exhausted", "stream_broken", "too_large", "invalid",
	"shutdown_queued", "shutdown_pending", "shutdown_retry", "stream_poison",
}

// String returns the reason's metric label value.
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropReasonNames[r]
	}
	return "unknown"
}

// AtShutdown reports whether r counts what Shutdown gave up on (the shutdown_* reasons): with
// a spool, their records stay on disk for the next start.
func (r DropReason) AtShutdown() bool { return r >= DropShutdownQueued && r <= DropShutdownRetry }

// RetryReason says why a request is sent again after a delay. Its String is the reason label
// of otlpgate_client_retried_requests_total, as stable as a DropReason's.
type RetryReason uint8

// Why a request is sent again after a delay.
const (
	RetryFailed     RetryReason = iota // FailedRetryable, or a retryable status or transport error
	RetryThrottled                     // UNAVAILABLE or RESOURCE_EXHAUSTED with RetryInfo, 429/503 with Retry-After
	RetryAckTimeout                    // a unary call or POST not answered within AckTimeout
	numRetryReasons
)

var retryReasonNames = [numRetryReasons]string{"failed_retryable", "throttled", "ack_timeout"}

// String returns the reason's metric label value.
func (r RetryReason) String() string {
	if r < numRetryReasons {
		return retryReasonNames[r]
	}
	return "unknown"
}
