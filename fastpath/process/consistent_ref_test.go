//go:build !race

// These tests are pure computation on one goroutine, a million decisions against a reference
// that works with big numbers: the race detector has nothing to watch in them and would make
// them take a minute, so they run in the allocation tests' plain pass (make test).

package process

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// The Collector-contrib probabilistic_sampler's proportional and equalizing decisions, written
// plainly from its source (pkg/sampling's ProbabilityToThresholdWithPrecision, the samplers'
// decide and the tracestate carrier) with exact rational arithmetic where it computes in
// float64 without rounding, and float64 where its result depends on float64's rounding.
// Nothing here calls the package's code.

var refTwo56 = new(big.Int).Lsh(big.NewInt(1), 56)

// refLeadingHexZeros counts the hex zeros after the point of x, 0 < x < 1: the k with
// 16^-(k+1) <= x < 16^-k.
func refLeadingHexZeros(x *big.Rat) int {
	k := 0
	limit := big.NewRat(1, 16)
	for x.Cmp(limit) < 0 {
		k++
		limit.Mul(limit, big.NewRat(1, 16))
	}
	return k
}

type refKey struct {
	p         float64
	precision int
}

// refThresholds remembers refThreshold's answers for the million spans, which ask the same
// questions many times. Only the million-span test, which runs alone, uses it.
var refThresholds = map[refKey]*big.Int{}

// refThresholdOnce is refThreshold, remembered.
func refThresholdOnce(p float64, precision int) (*big.Int, bool) {
	k := refKey{p, precision}
	if th, ok := refThresholds[k]; ok {
		return th, th != nil
	}
	th, ok := refThreshold(p, precision)
	refThresholds[k] = th
	return th, ok
}

// refThreshold is the rejection threshold of probability p with precision significant hex
// digits, or false when p is outside [2^-56, 1].
func refThreshold(p float64, precision int) (*big.Int, bool) {
	if p < 0x1p-56 || p > 1 {
		return nil, false
	}
	exact := new(big.Rat).SetFloat64(p)
	one := big.NewRat(1, 1)
	if exact.Cmp(one) == 0 {
		return big.NewInt(0), true
	}
	rest := new(big.Rat).Sub(one, exact)
	digits := min(14, precision+max(refLeadingHexZeros(exact), refLeadingHexZeros(rest)))
	// Accepted values: p*2^56 rounded half up (math.Round of a positive number).
	scaled := new(big.Rat).Mul(exact, new(big.Rat).SetInt(refTwo56))
	scaled.Add(scaled, big.NewRat(1, 2))
	accepted := new(big.Int).Quo(scaled.Num(), scaled.Denom())
	th := new(big.Int).Sub(refTwo56, accepted)
	// Rounded half up to the digits kept.
	unit := new(big.Int).Exp(big.NewInt(16), big.NewInt(int64(14-digits)), nil)
	th.Add(th, new(big.Int).Rsh(unit, 1))
	th.Quo(th, unit)
	th.Mul(th, unit)
	return th, true
}

func refTValue(th *big.Int) string {
	if th.Sign() == 0 {
		return "0"
	}
	return strings.TrimRight(fmt.Sprintf("%014x", th), "0")
}

// refSpan is a span the reference decides: a trace id and, optionally, an rv, a th and another
// vendor's member in its tracestate.
type refSpan struct {
	tid    [16]byte
	rv, th string
	vendor bool
}

func (r refSpan) tracestate() string {
	var ot []string
	if r.th != "" {
		ot = append(ot, "th:"+r.th)
	}
	if r.rv != "" {
		ot = append(ot, "rv:"+r.rv)
	}
	var ts []string
	if r.vendor {
		ts = append(ts, "vendor=v1")
	}
	if len(ot) > 0 {
		ts = append(ts, "ot="+strings.Join(ot, ";"))
	}
	return strings.Join(ts, ",")
}

// refDecide returns whether the Collector keeps the span and the tracestate it leaves with.
// precision is 1 to 14; pct is not 0.
func refDecide(mode SampleMode, pct float32, precision int, r refSpan) (bool, string) {
	var rnd uint64
	if r.rv != "" {
		rnd, _ = strconv.ParseUint(r.rv, 16, 64)
	} else {
		rnd = binary.BigEndian.Uint64(r.tid[8:]) &^ (0xff << 56)
	}
	randomness := new(big.Int).SetUint64(rnd)
	var incoming *big.Int // the arriving threshold: th's digits followed by zeros to 14
	if r.th != "" {
		incoming, _ = new(big.Int).SetString(r.th+strings.Repeat("0", 14-len(r.th)), 16)
		if incoming.Cmp(randomness) > 0 {
			return false, "" // inconsistent: fails closed
		}
	}
	ratio := max(float64(pct)/100, 0x1p-56)
	var th *big.Int
	switch mode {
	case SampleProportional:
		p := ratio
		if incoming != nil {
			in, _ := new(big.Rat).SetFrac(new(big.Int).Sub(refTwo56, incoming), refTwo56).Float64()
			p = in * ratio
		}
		var ok bool
		if th, ok = refThresholdOnce(p, precision); !ok {
			return false, ""
		}
	case SampleEqualizing:
		th, _ = refThresholdOnce(ratio, precision)
		if incoming != nil && incoming.Cmp(th) > 0 {
			th = incoming
		}
	}
	if th.Cmp(randomness) > 0 {
		return false, ""
	}
	tv := refTValue(th)
	if incoming != nil && incoming.Cmp(th) > 0 {
		tv = r.th // a stricter arriving threshold is not lowered
	}
	ot := "ot="
	if r.rv != "" {
		ot += "rv:" + r.rv + ";"
	}
	ot += "th:" + tv
	if r.vendor {
		ot += ",vendor=v1"
	}
	return true, ot
}

// The threshold of random probabilities, percentages read as the Collector reads them and
// products of two, at every precision, equals the reference's.
func TestThresholdMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(235, 4))
	n := 60_000
	if testing.Short() {
		n = 6_000
	}
	for i := range n {
		var p float64
		switch i % 3 {
		case 0: // a percentage, spread over every magnitude
			p = float64(float32(100*math.Pow(2, -56*r.Float64()))) / 100
		case 1: // near 1
			p = 1 - math.Pow(2, -53*r.Float64())
		case 2: // a product, as proportional mode computes
			p = r.Float64() * r.Float64()
		}
		precision := 1 + r.IntN(14)
		want, wantOK := refThreshold(p, precision)
		got, ok := thresholdFor(p, precision)
		if ok != wantOK || ok && new(big.Int).SetUint64(got).Cmp(want) != 0 {
			t.Fatalf("p %v (%x) precision %d: threshold %x %v, the reference %x %v", p, p, precision, got, ok, want, wantOK)
		}
		if ok && tvalue(got) != refTValue(want) {
			t.Fatalf("p %v: th %q, the reference %q", p, tvalue(got), refTValue(want))
		}
	}
}

// appendRefSpan appends the entry ResourceSpans{ScopeSpans{span}} of a span with r's trace id
// and tracestate.
func appendRefSpan(dst []byte, r refSpan, ts string) []byte {
	var span []byte
	span = protowire.AppendTag(span, 1, protowire.BytesType)
	span = protowire.AppendBytes(span, r.tid[:])
	span = protowire.AppendTag(span, 2, protowire.BytesType)
	span = protowire.AppendBytes(span, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	if ts != "" {
		span = protowire.AppendTag(span, 3, protowire.BytesType)
		span = protowire.AppendString(span, ts)
	}
	span = protowire.AppendTag(span, 5, protowire.BytesType)
	span = protowire.AppendString(span, "op")
	var scope []byte
	scope = protowire.AppendTag(scope, 2, protowire.BytesType)
	scope = protowire.AppendBytes(scope, span)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	return protowire.AppendBytes(dst, scope)
}

// outTracestate reads the tracestate of the one span of an entry AppendEntry wrote.
func outTracestate(t testing.TB, out []byte) string {
	msg := out
	for _, num := range []protowire.Number{1, 2, 2} { // entry, scope, span
		n, typ, k := protowire.ConsumeTag(msg)
		if n != num || typ != protowire.BytesType {
			t.Fatalf("unexpected output % x", out)
		}
		msg, k = protowire.ConsumeBytes(msg[k:])
		if k < 0 {
			t.Fatalf("unexpected output % x", out)
		}
	}
	ts := ""
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		msg = msg[k:]
		k = protowire.ConsumeFieldValue(n, typ, msg)
		if n == 3 {
			v, _ := protowire.ConsumeBytes(msg)
			ts = string(v)
		}
		msg = msg[k:]
	}
	return ts
}

// A million spans with random trace ids, some with an rv, an arriving th or another vendor's
// member in their tracestate, at percentages and precisions that round differently, decide
// and leave with the tracestate the reference gives.
func TestConsistentMillionTraceIDs(t *testing.T) {
	type config struct {
		mode      SampleMode
		pct       float32
		precision int
		c         *Chain
	}
	var configs []*config
	for _, mode := range []SampleMode{SampleProportional, SampleEqualizing} {
		for _, pct := range []float32{1e-9, 100 * 0x1p-14, 0.03, 1, 10, 15.3, 100.0 / 3, 40, 50, 62, 99.99, 100} {
			for _, precision := range []int{1, 3, 4, 14} {
				c := mustChain(t, Config{Sample: SampleConfig{On: true, Mode: mode, Percent: pct, Precision: precision}})
				configs = append(configs, &config{mode, pct, precision, c})
			}
		}
	}
	r := rand.New(rand.NewPCG(23, 235))
	// Arriving thresholds of 1 to 14 digits, one of them 0.
	ths := []string{"0"}
	for len(ths) < 24 {
		ths = append(ths, strings.TrimRight(fmt.Sprintf("%014x", r.Uint64()>>8), "0")[:1+r.IntN(14)])
	}
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	entry := make([]byte, 0, 256)
	dst := make([]byte, 0, 512)
	kept := 0
	for i := range n {
		cf := configs[i%len(configs)]
		var s refSpan
		binary.LittleEndian.PutUint64(s.tid[:8], r.Uint64())
		binary.LittleEndian.PutUint64(s.tid[8:], r.Uint64()|1<<56) // never all zero
		switch r.IntN(8) {
		case 0:
			s.rv = fmt.Sprintf("%014x", r.Uint64()>>8)
		case 1:
			s.th = ths[r.IntN(len(ths))]
		case 2:
			s.rv = fmt.Sprintf("%014X", r.Uint64()>>8)
			s.th = ths[r.IntN(len(ths))]
		}
		s.vendor = r.IntN(4) == 0
		ts := s.tracestate()
		entry = appendRefSpan(entry[:0], s, ts)
		out, tl, err := cf.c.AppendEntry(dst[:0], fastpath.Traces, entry, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		wantKept, wantTS := refDecide(cf.mode, cf.pct, cf.precision, s)
		gotKept, gotTS := len(out) > 0, ""
		if gotKept {
			gotTS = outTracestate(t, out)
			kept++
		}
		if gotKept != wantKept || gotTS != wantTS || tl[tSampledKept]+tl[tSampledOut] != 1 {
			t.Fatalf("%v %v%% precision %d, trace %x, tracestate %q: kept %v with %q, the reference %v with %q",
				cf.mode, cf.pct, cf.precision, s.tid, ts, gotKept, gotTS, wantKept, wantTS)
		}
	}
	if kept == 0 || kept == n {
		t.Fatalf("%d of %d kept: the test says nothing", kept, n)
	}
}
