package conformance

import (
	"math"
	"math/rand/v2"
	"strings"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcommon "go.opentelemetry.io/proto/otlp/common/v1"
	rresource "go.opentelemetry.io/proto/otlp/resource/v1"
)

// gen builds random OTLP messages with the reference types. Sizes are kept small so that a few
// hundred seeds per signal stay fast under -race; breadth comes from the number of seeds, and
// each choice gives zero values and absent submessages a fair share, since those are where two
// encoders most often disagree (presence, omission of defaults, empty lengths).
type gen struct {
	r *rand.Rand
	// wellFormedIDs keeps every trace and span id empty or of its size, as the Collector's
	// decoder and the JSON transcoder require; without it some ids have other lengths.
	wellFormedIDs bool
}

// newGen seeds a generator. stream separates the signals, so the same seed number gives
// unrelated data per signal while staying reproducible from the number printed on failure.
func newGen(seed, stream uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, stream))}
}

// chance reports true with probability p.
func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// upTo returns 0..n inclusive.
func (g *gen) upTo(n int) int { return g.r.IntN(n + 1) }

// u64 spreads values over every varint length, with the edges (0 and the maximum) likely.
func (g *gen) u64() uint64 {
	switch g.r.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	default:
		return g.r.Uint64() >> g.r.UintN(64)
	}
}

func (g *gen) u32() uint32 { return uint32(g.u64() >> 32) }

func (g *gen) i64() int64 {
	v := int64(g.u64() >> 1)
	if g.chance(0.4) {
		v = -v - 1
	}
	return v
}

func (g *gen) i32() int32 { return int32(g.i64() >> 32) }

// enum picks one of the defined values or, now and then, a value the schema does not define:
// proto3 enums are open, so both sides must keep it, negative ones included (10-byte varints).
func (g *gen) enum(defined int32) int32 {
	switch {
	case g.chance(0.05):
		return -1 - g.r.Int32N(1000)
	case g.chance(0.05):
		return defined + 1 + g.r.Int32N(1000)
	default:
		return g.r.Int32N(defined + 1)
	}
}

// f64 returns a double that is neither NaN nor negative zero (see float_test.go for why those
// two are kept out of random data).
func (g *gen) f64() float64 {
	switch g.r.IntN(10) {
	case 0:
		return 0
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return math.SmallestNonzeroFloat64
	case 4:
		return -math.MaxFloat64
	case 5:
		v := math.Float64frombits(g.r.Uint64())
		if math.IsNaN(v) || v == 0 {
			return 1
		}
		return v
	default:
		return g.r.NormFloat64() * 1e6
	}
}

// f64Present is for doubles that are always written (oneof members, proto3 optional, packed
// repeated): there negative zero must survive both encoders, so it is allowed.
func (g *gen) f64Present() float64 {
	if g.chance(0.05) {
		return math.Copysign(0, -1)
	}
	return g.f64()
}

// optF64 is a proto3 optional double: absent, zero (present), or any value.
func (g *gen) optF64() *float64 {
	if g.chance(0.3) {
		return nil
	}
	v := g.f64Present()
	return &v
}

// runes mixes one-, two-, three- and four-byte UTF-8 sequences and control characters; proto3
// strings must be valid UTF-8, which protobuf-go checks.
var runes = []rune("abcdefghijklmnopqrstuvwxyz0123456789 _-./:=\x00\t\né߀世界🙂\u2028")

func (g *gen) str(maxRunes int) string {
	n := g.upTo(maxRunes)
	if n == 0 {
		return ""
	}
	var b strings.Builder
	for range n {
		b.WriteRune(runes[g.r.IntN(len(runes))])
	}
	return b.String()
}

// id is a trace or span id: usually the right length, sometimes empty or (unless
// wellFormedIDs) of any length up to twice its size, which the wire format does not care about.
func (g *gen) id(size int) []byte {
	switch g.r.IntN(6) {
	case 0:
		return nil
	case 1:
		if b := g.bytes(2 * size); !g.wellFormedIDs || len(b) == 0 || len(b) == size {
			return b
		}
	}
	return g.fixedBytes(size)
}

func (g *gen) fixedBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return b
}

func (g *gen) bytes(maxLen int) []byte {
	n := g.upTo(maxLen)
	if n == 0 && g.chance(0.5) {
		return nil
	}
	return g.fixedBytes(n)
}

// anyValue returns an AnyValue of every kind, nesting arrays and kvlists up to depth levels.
// A nil Value (no member of the oneof set) is a valid, distinct encoding: an empty message.
func (g *gen) anyValue(depth int) *rcommon.AnyValue {
	kinds := 9
	if depth <= 0 {
		kinds = 7 // no arrays or kvlists below the last level
	}
	v := &rcommon.AnyValue{}
	switch g.r.IntN(kinds) {
	case 0:
		// unset oneof
	case 1:
		v.Value = &rcommon.AnyValue_StringValue{StringValue: g.str(12)}
	case 2:
		v.Value = &rcommon.AnyValue_BoolValue{BoolValue: g.chance(0.5)}
	case 3:
		v.Value = &rcommon.AnyValue_IntValue{IntValue: g.i64()}
	case 4:
		v.Value = &rcommon.AnyValue_DoubleValue{DoubleValue: g.f64Present()}
	case 5:
		v.Value = &rcommon.AnyValue_BytesValue{BytesValue: g.bytes(12)}
	case 6:
		v.Value = &rcommon.AnyValue_StringValueStrindex{StringValueStrindex: g.i32()}
	case 7:
		vals := make([]*rcommon.AnyValue, g.upTo(3))
		for i := range vals {
			vals[i] = g.anyValue(depth - 1)
		}
		arr := &rcommon.ArrayValue{}
		if len(vals) > 0 || g.chance(0.5) {
			arr.Values = vals
		}
		v.Value = &rcommon.AnyValue_ArrayValue{ArrayValue: arr}
	case 8:
		v.Value = &rcommon.AnyValue_KvlistValue{KvlistValue: &rcommon.KeyValueList{Values: g.attrs(3, depth-1)}}
	}
	return v
}

// attrs returns up to n attributes whose values nest up to depth levels.
func (g *gen) attrs(n, depth int) []*rcommon.KeyValue {
	k := g.upTo(n)
	if k == 0 {
		return nil
	}
	kvs := make([]*rcommon.KeyValue, k)
	for i := range kvs {
		kv := &rcommon.KeyValue{Key: g.str(10)}
		if !g.chance(0.1) {
			kv.Value = g.anyValue(depth)
		}
		if g.chance(0.1) {
			kv.KeyStrindex = g.i32()
		}
		kvs[i] = kv
	}
	return kvs
}

func (g *gen) scope() *rcommon.InstrumentationScope {
	if g.chance(0.2) {
		return nil
	}
	return &rcommon.InstrumentationScope{
		Name:                   g.str(10),
		Version:                g.str(6),
		Attributes:             g.attrs(3, 1),
		DroppedAttributesCount: g.u32(),
	}
}

func (g *gen) resource() *rresource.Resource {
	if g.chance(0.15) {
		return nil
	}
	res := &rresource.Resource{
		Attributes:             g.attrs(5, 2),
		DroppedAttributesCount: g.u32(),
	}
	for range g.upTo(2) {
		ref := &rcommon.EntityRef{SchemaUrl: g.schemaURL(), Type: g.str(8)}
		for range g.upTo(3) {
			ref.IdKeys = append(ref.IdKeys, g.str(8))
		}
		for range g.upTo(2) {
			ref.DescriptionKeys = append(ref.DescriptionKeys, g.str(8))
		}
		res.EntityRefs = append(res.EntityRefs, ref)
	}
	return res
}

func (g *gen) schemaURL() string {
	if g.chance(0.5) {
		return ""
	}
	return "https://opentelemetry.io/schemas/1." + g.str(3)
}
