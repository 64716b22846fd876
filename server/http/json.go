package httpserver

import (
	"github.com/otlpgate/otlpgate/fastpath"
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
// (pooled, of the body's size: realistic OTLP/JSON writes about half its size; only packed
// numbers write more, 8 bytes for "0,", so at most 4 times) and the transcoder's state, which
// follows the nesting depth, not the body.
func (s *Server) admitJSON(sc *scratch, sig fastpath.Signal, body []byte) (*fastpath.Batch, admission.Reason, error) {
	t := transcoders.Get()
	sc.out = pool.GetBytes(len(body))
	var scan fastpath.Scan
	var err error
	*sc.out, scan, err = t.AppendRequest(*sc.out, sig, body)
	transcoders.Put(t)
	if err != nil {
		ctr.refuse(encJSON, sig, admission.Invalid, 0)
		return nil, admission.Invalid, err
	}
	ctr.items[encJSON][sig].Add(float64(scan.Items))
	ctr.reqs[encJSON][sig].Inc()
	if scan.Resources == 0 {
		return nil, admission.Accepted, nil
	}
	b, reason := s.admit(encJSON, sc, sig, *sc.out, scan.Items)
	return b, reason, nil
}
