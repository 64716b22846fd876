package httpserver

import (
	"sync"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
)

// jsonSupported: application/json bodies are transcoded (a constant, so that the handler reads
// the same with the JSON path compiled out).
const jsonSupported = true

// transcoders are pooled: one holds a parser whose memory grows with the largest body it
// parsed, so one is put back only after a body of ordinary size.
var transcoders = sync.Pool{New: func() any { return new(fastpath.JSONTranscoder) }}

// keepTranscoderBelow is the largest body after which a transcoder returns to the pool; past
// it the transcoder, and the memory fastjson keeps for such a body, is left to the GC.
const keepTranscoderBelow = 1 << 20

// admitJSON transcodes an OTLP/JSON body into the v1 protobuf bytes the pipeline carries and
// admits them. A body the transcoder refuses is an error (answered 400 with its reason); there
// is no partial success for JSON, whose entries cannot be told apart once the parse failed.
func (s *Server) admitJSON(sc *scratch, sig fastpath.Signal, body []byte) (*fastpath.Batch, admission.Reason, error) {
	t := transcoders.Get().(*fastpath.JSONTranscoder)
	sc.out = pool.GetBytes(len(body))
	var scan fastpath.Scan
	var err error
	*sc.out, scan, err = t.AppendRequest(*sc.out, sig, body)
	if len(body) < keepTranscoderBelow {
		transcoders.Put(t)
	}
	if err != nil {
		ctr.refuse(encJSON, sig, admission.Invalid, 0)
		return nil, admission.Invalid, err
	}
	ctr.items[encJSON][sig].Add(float64(scan.Items))
	if scan.Resources == 0 {
		return nil, admission.Accepted, nil
	}
	b, reason := s.admit(encJSON, sig, *sc.out, scan.Items)
	return b, reason, nil
}
