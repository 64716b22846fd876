package client

import "google.golang.org/protobuf/encoding/protowire"

// rejectedItems reads the rejected item count of a v1 Export*ServiceResponse: field 1 is
// partial_success, whose field 1 is rejected_spans, rejected_data_points or
// rejected_log_records for the three signals alike. Anything it cannot read counts as 0: the
// response only feeds a metric, and the call itself succeeded.
func rejectedItems(resp []byte) int64 {
	var rejected int64
	for b := resp; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return 0
			}
			if c, ok := rejectedIn(v); ok {
				rejected = c // a repeated message field merges: the last count wins
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0
		}
		b = b[m:]
	}
	return rejected
}

func rejectedIn(b []byte) (int64, bool) {
	var rejected int64
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, false
			}
			rejected, found = int64(v), true
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, false
		}
		b = b[m:]
	}
	return rejected, found
}
