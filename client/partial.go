package client

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// A v1 upstream (gRPC or OTLP/HTTP) may answer an export it took with a partial success: how
// many items it rejected, and why. The count is the upstream's word, and an upstream can be
// wrong: one that reports a million rejected spans for a batch of ten, or 2^63-1, must not make
// otlpgate_client_partially_rejected_items_total say what never happened (nor wrap it). So the
// count is taken at most the batch's items, and never below none; an answer outside that range
// is counted apart (otlpgate_client_impossible_partial_successes_total) and logged. The message
// is logged, redacted and cut to maxPartialMessage, and becomes the destination's last error on
// the status page: the counters say how many, the message says why. Both log lines come at most
// once a second per destination, since an upstream that answers so answers every request so.

// maxPartialMessage caps the error_message kept of a partial success, for the log and the
// status page.
const maxPartialMessage = 256

// partialSuccess is what the partial_success (field 1) of a v1 Export*ServiceResponse says: its
// field 1 is rejected_spans, rejected_data_points or rejected_log_records for the three signals
// alike, its field 2 error_message.
type partialSuccess struct {
	rejected int64
	message  []byte // valid as long as the response's bytes; copy to retain
}

// readPartialSuccess reads the partial success of a v1 response. Anything it cannot read counts
// as none: the answer only feeds a metric and a log line, and the call itself succeeded.
//
// The walk is fastpath's, which refuses group wire types as no request of ours has them; an
// upstream's response may carry an unknown field of any wire type, which a decoder skips. So
// a response the walk cannot read is decoded whole by the generated decoder, which skips
// them: a rejected count beside such a field is still counted. That costs allocations, on
// responses no OTLP server sends.
func readPartialSuccess(resp []byte) partialSuccess {
	var ps partialSuccess
	it := fastpath.NewTopLevel(resp)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num == 1 && f.Type == protowire.BytesType {
			// A repeated message field merges: each field present last wins.
			if !ps.merge(resp[f.Value:f.End]) {
				return partialDecoded(resp)
			}
		}
	}
	if it.Err() != nil {
		return partialDecoded(resp)
	}
	return ps
}

// merge reads one partial_success message into ps; false when the walk cannot read it.
func (ps *partialSuccess) merge(b []byte) bool {
	it := fastpath.NewTopLevel(b)
	for f, more := it.Next(); more; f, more = it.Next() {
		switch {
		case f.Num == 1 && f.Type == protowire.VarintType:
			ps.rejected = int64(f.Varint)
		case f.Num == 2 && f.Type == protowire.BytesType:
			ps.message = b[f.Value:f.End]
		}
	}
	return it.Err() == nil
}

// partialDecoded is readPartialSuccess by the generated decoder; none when it cannot decode
// resp.
func partialDecoded(resp []byte) partialSuccess {
	var r coltracev1.ExportTraceServiceResponse
	if err := r.UnmarshalVT(resp); err != nil {
		return partialSuccess{}
	}
	p := r.GetPartialSuccess()
	return partialSuccess{rejected: p.GetRejectedSpans(), message: []byte(p.GetErrorMessage())}
}

// partial counts, logs and notes the partial success of resp, the answer that delivered r.
// Called by the sender that read the answer, before it finishes r.
func (d *Dest) partial(r *request, resp []byte) {
	ps := readPartialSuccess(resp)
	if ps.rejected == 0 && len(ps.message) == 0 {
		return
	}
	items := int64(r.items)
	n := min(max(ps.rejected, 0), items)
	impossible := n != ps.rejected
	if impossible {
		d.m.impossiblePartial.Inc()
	}
	if n > 0 {
		d.m.partialRejected.Add(float64(n))
	}
	lim := &d.partialLog
	if impossible {
		lim = &d.impossibleLog
	}
	if !lim.allow() {
		return
	}
	// Redacted before it is cut: a cut first could halve a token the upstream echoed.
	msg := partialMessage(redactSecrets(string(ps.message), d.secrets))
	if impossible {
		d.noteError(fmt.Errorf("partial success: the upstream reported %d of %d items rejected, counted as %d: %s", ps.rejected, items, n, msg))
		d.log.Warn("upstream reported a partial success outside the request's items: counted within them",
			"signal", r.sig.String(), "items", items, "reported", ps.rejected, "counted", n, "message", msg)
		return
	}
	d.noteError(fmt.Errorf("partial success: the upstream rejected %d of %d items: %s", n, items, msg))
	d.log.Warn("upstream rejected part of a batch", "signal", r.sig.String(), "items", items, "rejected", n, "message", msg)
}

// partialMessage is an error_message, redacted, as it is logged: at most maxPartialMessage
// bytes, valid UTF-8.
func partialMessage(m string) string {
	if len(m) > maxPartialMessage {
		return strings.ToValidUTF8(m[:maxPartialMessage], "\uFFFD") + "..."
	}
	return strings.ToValidUTF8(m, "\uFFFD")
}
