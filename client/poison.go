package client

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
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
// was alone on a stream that ended with INTERNAL gets a strike when the upstream answered
// something else since it became a suspect, or since its previous lone end (evidence that the
// path works and the request does not); at PoisonAfter strikes it is dropped (reason
// stream_poison). A lone suspect is sent again after the retry backoff. A transient reset costs
// a lone request a backoff, and the requests it interrupted one round trip each; then the lane
// pipelines again.
//
// Other requests delivered are the evidence while there is traffic. Without any, a poison
// request would be sent again for ever with a spool (no retry budget), so before a lane sends
// a suspect alone with no evidence since its last end, it probes the upstream (probe): an empty
// request on a stream of its own, answered by any upstream that reads and answers streams. An
// outage fails the probe too, and the lone end then strikes nothing.

// endedInternal reports whether a stream that ended with err marks what was pending on it as
// suspect, with poison detection on, when the requests would be sent again: INTERNAL, or
// RESOURCE_EXHAUSTED without a RetryInfo (classify made that a retry, not a throttle), which is
// what grpc-go's server ends a stream with when a message is over its receive limit (the
// Collector's is 4MiB by default, below max-send-msg-size): such a message breaks every stream
// it is sent on, like one the upstream cannot decode.
func (d *Dest) endedInternal(err error, v verdict) bool {
	// A clean end (io.EOF: every stream that was re-opened) is no INTERNAL, and status.Code
	// would make a status of code Unknown for it, three allocations per stream.
	if v != verdictRetry || d.cfg.PoisonAfter <= 0 || errors.Is(err, io.EOF) {
		return false
	}
	c := status.Code(err)
	return c == codes.Internal || c == codes.ResourceExhausted
}

// suspect acts on r, pending on a stream that ended with INTERNAL. Pending with others, r
// becomes a suspect and is sent again at once, alone. Alone on it, r takes a strike, and is
// dropped at PoisonAfter, but only when the upstream answered another request or a probe since
// r became a suspect or last ended a stream alone: while nothing gets through (a proxy resetting every stream while its own
// upstream restarts) the ends say nothing of r, and dropping on them would drop every request
// that happened to be sent alone. Either way a lone r waits the retry backoff before it is sent
// again, so that its strikes are spread over the backoff rather than taken in a burst.
func (d *Dest) suspect(r *request, alone bool) {
	if !r.suspect {
		r.suspectAt = d.evidence()
	}
	r.suspect = true
	if !alone {
		d.resend(r)
		return
	}
	if d.evidence() != r.suspectAt {
		r.strikes++
		if int(r.strikes) >= d.cfg.PoisonAfter {
			d.log.Warn("request dropped: every stream it was sent on alone ended with INTERNAL, while other requests were delivered",
				"signal", r.sig.String(), "id", r.id, "streams", r.strikes, "items", r.items)
			d.drop(r, DropStreamPoison)
			return
		}
	}
	r.suspectAt = d.evidence() // each strike needs evidence of its own
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

// evidence counts what shows the path to the upstream works: requests delivered, and probes
// answered. Safe for concurrent use.
func (d *Dest) evidence() uint64 { return d.acked.Load() + d.probed.Load() }

// needsProbe reports whether r, about to be sent alone, is a suspect with no evidence since it
// became one or last ended a stream alone. Called by the lane that sends r.
func (d *Dest) needsProbe(r *request) bool {
	return r.suspect && d.cfg.PoisonAfter > 0 && d.evidence() == r.suspectAt
}

// probe sends an empty request of sig (no id, no entries: zero bytes, which grpc-go, the
// Collector and otlpgate all decode) on a stream of its own and waits, at most AckTimeout,
// for its answer. Any answer counts as evidence (probed): the upstream reads and answers
// streams, so a suspect that ends every stream it is alone on is the request, not the path.
// It runs on a lane, which has nothing else to send meanwhile: its suspect waits for it.
func (d *Dest) probe(sig fastpath.Signal) {
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.AckTimeout)
	defer cancel()
	var cs streamConn
	if d.h2 != nil {
		b := newH2Bidi(d)
		b.msg = new(h2Msg)
		if b.open(ctx, sig) != nil {
			return
		}
		cs = b
	} else {
		gs, err := d.conn.NewStream(ctx, &streamDesc, d.methods[sig], d.streamOpts...)
		if err != nil {
			return
		}
		cs = gs
	}
	d.m.streamsOpened.Inc()
	var req codec.Raw
	if cs.SendMsg(&req) != nil || cs.CloseSend() != nil {
		return
	}
	var resp otepv1.ExportResponse
	if cs.RecvMsg(&resp) != nil {
		return
	}
	d.probed.Add(1)
}
