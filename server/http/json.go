package httpserver

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
)

// jsonSupported: application/json bodies are transcoded (a constant, so that the handler reads
// the same with the JSON path compiled out).
const jsonSupported = true

// transcoders are pooled. A transcoder reads the body as a stream and keeps a few KiB between
// calls whatever it served, so every one goes back to the pool: a free list, which keeps them
// through collections (a sync.Pool makes them, and their state, again after each one), one per
// JSON request being transcoded at once.
var transcoders = pool.NewFreeList[fastpath.JSONTranscoder](maxFreeTranscoders, nil)

const maxFreeTranscoders = 256

// admitJSON transcodes an OTLP/JSON body into the v1 protobuf bytes the pipeline carries and
// admits them. A body the transcoder refuses is an error (answered 400 with its reason); there
// is no partial success for JSON, whose entries cannot be told apart once the parse failed.
//
// Besides the body, whose bytes the intake limiter holds, transcoding takes the output buffer
// and the transcoder's state, which follows the nesting depth, not the body. The output starts
// in a buffer of the body's size (realistic OTLP/JSON writes about half of it) and grows
// through the scratch (Grow), each buffer charged to the intake limiter before it is made:
// packed numbers write up to four times their text (8 bytes for "0,"). An output that would
// pass -http.max-request-bytes is refused as a body too large (413), one the limiter has no
// room for as busy (429).
func (s *Server) admitJSON(sc *scratch, sig fastpath.Signal, body []byte) (*pipeline.Batch, admission.Reason, error) {
	if sc.out = sc.getCharged(len(body)); sc.out == nil {
		ctr.refuse(encJSON, sig, admission.Busy, 0)
		return nil, admission.Busy, nil
	}
	sc.outLimit = s.cfg.MaxRequestBytes
	t := transcoders.Get()
	out, scan, err := t.AppendRequestWithin(sc, *sc.out, sig, body)
	transcoders.Put(t)
	switch {
	case errors.Is(err, pipeline.ErrBudget):
		ctr.refuse(encJSON, sig, admission.Busy, 0)
		return nil, admission.Busy, nil
	case err == errBodyTooLarge:
		return nil, reasonBodyTooLarge, nil
	case err != nil:
		ctr.refuse(encJSON, sig, admission.Invalid, 0)
		return nil, admission.Invalid, err
	}
	// On success the output is in the last buffer Grow gave, sc.out; on error sc.out keeps
	// its own slice, since the returned one may lie in a buffer Grow gave back already.
	*sc.out = out
	ctr.items[encJSON][sig].Add(float64(scan.Items))
	ctr.reqs[encJSON][sig].Inc()
	if scan.Resources == 0 {
		return nil, admission.Accepted, nil
	}
	b, reason := s.admit(encJSON, sc, sig, *sc.out, scan.Items)
	return b, reason, nil
}

// Grow implements fastpath.Grower for the transcoder's output, which lives in s.out: a buffer
// of twice the room (at least n more bytes, at most s.outLimit), charged to the intake limiter
// before it is made as every buffer of the scratch is, takes dst's bytes, and the buffer it
// replaces is given back with its charge. It refuses with errBodyTooLarge an output that
// would pass s.outLimit, and with pipeline.ErrBudget when the limiter has no room.
func (s *scratch) Grow(dst []byte, n int) ([]byte, error) {
	need := len(dst) + n
	if need > s.outLimit {
		return dst, errBodyTooLarge
	}
	nb := s.getCharged(min(max(2*cap(dst), need), s.outLimit))
	if nb == nil {
		return dst, pipeline.ErrBudget
	}
	*nb = append(*nb, dst...)
	s.putCharged(s.out)
	s.out = nb
	return *nb, nil
}
