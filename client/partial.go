package client

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// rejectedItems reads the rejected item count of a v1 Export*ServiceResponse: field 1 is
// partial_success, whose field 1 is rejected_spans, rejected_data_points or
// rejected_log_records for the three signals alike. Anything it cannot read counts as 0: the
// response only feeds a metric, and the call itself succeeded.
func rejectedItems(resp []byte) int64 {
	var rejected int64
	it := fastpath.NewTopLevel(resp)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num == 1 && f.Type == protowire.BytesType {
			if c, ok := rejectedIn(resp[f.Value:f.End]); ok {
				rejected = c // a repeated message field merges: the last count wins
			}
		}
	}
	if it.Err() != nil {
		return 0
	}
	return rejected
}

func rejectedIn(b []byte) (int64, bool) {
	var rejected int64
	found := false
	it := fastpath.NewTopLevel(b)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num == 1 && f.Type == protowire.VarintType {
			rejected, found = int64(f.Varint), true
		}
	}
	if it.Err() != nil {
		return 0, false
	}
	return rejected, found
}
