package client

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// An upstream's response may carry unknown fields of any wire type, groups among them; the
// rejected count beside them is still read, as a decoder reads it. A response that cannot be
// decoded at all counts nothing.
func TestRejectedItemsBesideUnknownFields(t *testing.T) {
	partial := func(extra []byte) []byte {
		var ps []byte
		ps = protowire.AppendTag(ps, 1, protowire.VarintType)
		ps = protowire.AppendVarint(ps, 7)
		ps = append(ps, extra...)
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, "seven spans refused")
		var resp []byte
		resp = protowire.AppendTag(resp, 1, protowire.BytesType)
		return protowire.AppendBytes(resp, ps)
	}
	var group []byte
	group = protowire.AppendTag(group, 777, protowire.StartGroupType)
	group = protowire.AppendTag(group, 6, protowire.VarintType)
	group = protowire.AppendVarint(group, 48)
	group = protowire.AppendTag(group, 777, protowire.EndGroupType)
	var fixed []byte
	fixed = protowire.AppendTag(fixed, 9, protowire.Fixed64Type)
	fixed = protowire.AppendFixed64(fixed, 1)
	for _, c := range []struct {
		name string
		resp []byte
		want int64
	}{
		{"plain", partial(nil), 7},
		{"an unknown fixed64 field", partial(fixed), 7},
		{"an unknown group", partial(group), 7},
		{"an unknown group at the top level", append(partial(nil), group...), 7},
		{"truncated", partial(nil)[:5], 0},
		{"empty", nil, 0},
	} {
		if got := rejectedItems(c.resp); got != c.want {
			t.Errorf("%s: rejected %d, want %d", c.name, got, c.want)
		}
	}
}
