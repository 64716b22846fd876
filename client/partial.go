package client

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// rejectedItems reads the rejected item count of a v1 Export*ServiceResponse: field 1 is
// partial_success, whose field 1 is rejected_spans, rejected_data_points or
// rejected_log_records for the three signals alike. Anything it cannot read counts as 0: the
// response only feeds a metric, and the call itself succeeded.
//
// The walk is fastpath's, which refuses group wire types as no request of ours has them; an
// upstream's response may carry an unknown field of any wire type, which a decoder skips. So
// a response the walk cannot read is decoded whole by the generated decoder, which skips
// them: a rejected count beside such a field is still counted. That costs allocations, on
// responses no OTLP server sends.
func rejectedItems(resp []byte) int64 {
	var rejected int64
	it := fastpath.NewTopLevel(resp)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num == 1 && f.Type == protowire.BytesType {
			c, found, ok := rejectedIn(resp[f.Value:f.End])
			if !ok {
				return rejectedDecoded(resp)
			}
			if found {
				rejected = c // a repeated message field merges: the last count wins
			}
		}
	}
	if it.Err() != nil {
		return rejectedDecoded(resp)
	}
	return rejected
}

// rejectedIn reads field 1 of a partial_success message: the count, whether it is there, and
// whether the walk could read the message.
func rejectedIn(b []byte) (rejected int64, found, ok bool) {
	it := fastpath.NewTopLevel(b)
	for f, more := it.Next(); more; f, more = it.Next() {
		if f.Num == 1 && f.Type == protowire.VarintType {
			rejected, found = int64(f.Varint), true
		}
	}
	return rejected, found, it.Err() == nil
}

// rejectedDecoded is rejectedItems by the generated decoder; 0 when it cannot decode resp.
func rejectedDecoded(resp []byte) int64 {
	var r coltracev1.ExportTraceServiceResponse
	if err := r.UnmarshalVT(resp); err != nil {
		return 0
	}
	return r.GetPartialSuccess().GetRejectedSpans()
}
