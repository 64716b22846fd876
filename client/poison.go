package client

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A poison request is one the upstream can never take: grpc-go and the Collector answer a
// message they cannot decode by ending the whole stream with INTERNAL, so it breaks every stream
// it is sent on, and the requests pending with it must be sent again each time. A proxy's
// RST_STREAM INTERNAL_ERROR reads as the same status, and then nothing is wrong with any
// request: the end alone cannot tell the two apart, and must not drop anything.
//
// So the requests pending on a stream that ended with INTERNAL become suspects. A lane sends a
// suspect alone: it waits until nothing is pending on its stream, sends it, and sends nothing
// more on that stream until it is answered (lane.isolate): the innocent ones are delivered one by
// one, and the one the upstream cannot decode ends a stream it is alone on. A suspect that
// was alone on a stream that ended with INTERNAL gets a strike, once another request was
// delivered since it became a suspect (evidence that the path works and the request does not);
// at PoisonAfter strikes it is dropped (reason stream_poison). A lone suspect is sent again
// after the retry backoff. A transient reset costs a lone request a backoff, and the requests it
// interrupted one round trip each; then the lane pipelines again. A poison request with no
// other traffic at all is retried within its retry budget, as any failing request is.

// endedInternal reports whether a stream that ended with err marks what was pending on it as
// suspect, with poison detection on, when the requests would be sent again: INTERNAL, or
// RESOURCE_EXHAUSTED without a RetryInfo (classify made that a retry, not a throttle), which is
// what grpc-go's server ends a stream with when a message is over its receive limit (the
// Collector's is 4MiB by default, below max-send-msg-size): such a message breaks every stream
// it is sent on, like one the upstream cannot decode.
func (d *Dest) endedInternal(err error, v verdict) bool {
	if v != verdictRetry || d.cfg.PoisonAfter <= 0 {
		return false
	}
	c := status.Code(err)
	return c == codes.Internal || c == codes.ResourceExhausted
}

// suspect acts on r, pending on a stream that ended with INTERNAL. Pending with others, r
// becomes a suspect and is sent again at once, alone. Alone on it, r takes a strike, and is
// dropped at PoisonAfter, but only once the upstream has taken some other request since r
// became a suspect: while nothing gets through (a proxy resetting every stream while its own
// upstream restarts) the ends say nothing of r, and dropping on them would drop every request
// that happened to be sent alone. Either way a lone r waits the retry backoff before it is sent
// again, so that its strikes are spread over the backoff rather than taken in a burst.
func (d *Dest) suspect(r *request, alone bool) {
	if !r.suspect {
		r.suspectAt = d.acked.Load()
	}
	r.suspect = true
	if !alone {
		d.resend(r)
		return
	}
	if d.acked.Load() != r.suspectAt {
		r.strikes++
		if int(r.strikes) >= d.cfg.PoisonAfter {
			d.log.Warn("request dropped: every stream it was sent on alone ended with INTERNAL, while other requests were delivered",
				"signal", r.sig.String(), "id", r.id, "streams", r.strikes, "items", r.items)
			d.drop(r, DropStreamPoison)
			return
		}
	}
	d.retryAfter(r, RetryFailed, 0)
}

// isolate waits until no request is pending on s, so that the lane's next send goes out alone.
// It fills s's window with tokens of its own: holding all of them means the pending requests
// have all been settled, and none can be added meanwhile, since only the lane sends on s. It
// gives the tokens back before it returns. ok is false when s ended first (the caller
// replaces it), stop true when the destination stops.
func (l *lane) isolate(s *stream) (ok, stop bool) {
	n := 0
fill:
	for n < cap(s.slots) {
		select {
		case s.slots <- struct{}{}:
			n++
		case <-s.ctx.Done():
			break fill
		case <-l.d.stop:
			stop = true
			break fill
		}
	}
	ok = n == cap(s.slots)
	// The channel holds these n tokens and one per pending request; settle takes one per
	// request it finishes, so these n are always there for the taking.
	for range n {
		<-s.slots
	}
	return ok, stop
}
