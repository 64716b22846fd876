package conformance

import (
	"bytes"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestUnknownFields adds fields the schema does not declare, of every wire type, to random
// messages inside random requests (with the reference's SetUnknown), and runs the round trip
// on the result: vtprotobuf must keep them and write them back where protobuf-go does, so that
// a newer sender's fields pass through otlpgate intact. EqualVT must also see them.
func TestUnknownFields(t *testing.T) {
	for _, sig := range signals() {
		t.Run(sig.name, func(t *testing.T) {
			injected := 0
			for _, seed := range seeds(100) {
				g := newGen(seed, sig.stream+100)
				ref := sig.newRequest(g)
				plain, err := deterministic.Marshal(ref)
				if err != nil {
					t.Fatal(err)
				}
				added := injectUnknown(g, ref.ProtoReflect())
				with, err := sig.check(ref, g.r)
				if err == nil {
					err = sig.reuse(with)
				}
				if err != nil {
					t.Fatalf("%s seed %d (replay with -run 'TestUnknownFields/%s' -conformance.seed=%d): %v",
						sig.name, seed, sig.name, seed, err)
				}
				// Enclosing length prefixes may grow too, so the encoding grows by at least added.
				if len(with) < len(plain)+added {
					t.Fatalf("seed %d: encoding grew by %d bytes, %d bytes of unknown fields were added",
						seed, len(with)-len(plain), added)
				}
				stripped := ref.ProtoReflect().New().Interface()
				if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(with, stripped); err != nil {
					t.Fatal(err)
				}
				if b, err := deterministic.Marshal(stripped); err != nil || !bytes.Equal(b, plain) {
					t.Fatalf("seed %d: without its unknown fields the request is not the generated one (err %v)", seed, err)
				}
				if added == 0 {
					continue // an empty request has no message to carry unknown fields
				}
				injected++
				eq, err := sig.equalVT(with, plain)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if eq {
					t.Fatalf("seed %d: EqualVT ignores unknown fields", seed)
				}
			}
			if injected == 0 {
				t.Fatal("no request had a message to carry unknown fields")
			}
		})
	}
}

// injectUnknown appends one to three unknown fields to messages picked at random under m and
// returns how many bytes it added. The top-level request gets none: its encoding must stay a
// run of field-1 entries for the concatenation and OTEP checks.
func injectUnknown(g *gen, m protoreflect.Message) int {
	var nodes []protoreflect.Message
	collect(m, &nodes)
	nodes = nodes[1:]
	added := 0
	if len(nodes) == 0 {
		return 0
	}
	for range 1 + g.r.IntN(3) {
		n := nodes[g.r.IntN(len(nodes))]
		f := g.unknownField(n.Descriptor())
		n.SetUnknown(append(n.GetUnknown(), f...))
		added += len(f)
	}
	return added
}

// unknownField encodes one field whose number md does not declare: a small number, a reserved
// one (a removed field an old sender may still write), or any valid number, of any wire type.
func (g *gen) unknownField(md protoreflect.MessageDescriptor) []byte {
	num := protowire.Number(0)
	for range 100 {
		switch {
		case g.chance(0.2) && md.ReservedRanges().Len() > 0:
			r := md.ReservedRanges().Get(g.r.IntN(md.ReservedRanges().Len()))
			num = r[0]
		case g.chance(0.4):
			num = protowire.Number(1 + g.r.IntN(20))
		default:
			num = protowire.Number(1 + g.r.Int32N(int32(protowire.MaxValidNumber)))
		}
		if md.Fields().ByNumber(num) == nil && (num < protowire.FirstReservedNumber || num > protowire.LastReservedNumber) {
			break
		}
		num = 0
	}
	if num == 0 {
		panic("BUG: no free field number in " + string(md.FullName()))
	}
	var b []byte
	switch g.r.IntN(5) {
	case 0:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		b = protowire.AppendVarint(b, g.u64())
	case 1:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, g.u32())
	case 2:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, g.u64())
	case 3:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, g.bytes(12))
	case 4:
		b = protowire.AppendTag(b, num, protowire.StartGroupType)
		for range g.upTo(2) {
			b = protowire.AppendTag(b, protowire.Number(1+g.r.IntN(5)), protowire.VarintType)
			b = protowire.AppendVarint(b, g.u64())
		}
		b = protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	return b
}
