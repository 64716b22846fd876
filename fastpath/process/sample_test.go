package process

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// referenceKeep is the Collector-contrib probabilistic_sampler's hash_seed decision for a span
// with a valid trace id, no sampling.priority and an empty tracestate, written plainly from
// its source: FNV-1a over the seed (4 bytes, little endian) and the trace id, the low 14 bits
// compared with the percentage scaled to 2^14 in float32 precision, truncated.
func referenceKeep(pct float32, seed uint32, tid [16]byte) bool {
	if pct > 100 {
		pct = 100
	}
	scaled := uint32(pct * (16384 / 100.0))
	h := fnv.New32a()
	var s [4]byte
	binary.LittleEndian.PutUint32(s[:], seed)
	h.Write(s[:])
	h.Write(tid[:])
	return h.Sum32()&0x3fff < scaled
}

// spanBytes encodes one span with pdata, as a member of ScopeSpans.
func spanBytes(t testing.TB, tid pcommon.TraceID, ts string, prioKey string, prio any) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(tid)
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetName("op")
	sp.TraceState().FromRaw(ts)
	sp.Attributes().PutStr("http.method", "GET")
	switch v := prio.(type) {
	case int:
		sp.Attributes().PutInt(prioKey, int64(v))
	case float64:
		sp.Attributes().PutDouble(prioKey, v)
	case string:
		sp.Attributes().PutStr(prioKey, v)
	case bool:
		sp.Attributes().PutBool(prioKey, v)
	}
	b := marshalTraces(t, td)
	// request > entry > scope > span: the span is the payload of the innermost field 2.
	for _, num := range []int{1, 2, 2} {
		f, err := next(b, 0)
		if err != nil || int(f.num) != num {
			t.Fatalf("unexpected encoding: %v", err)
		}
		b = b[f.val:f.end]
	}
	return b
}

func mustTID(s string) pcommon.TraceID {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		panic(s)
	}
	return pcommon.TraceID(b)
}

// The Collector's TestHashingFunction: 100 (seed, trace id) pairs and their decisions at 50%,
// copied as facts.
var collectorVectors50 = []struct {
	seed    uint32
	traceID string
	sampled bool
}{
	{653, "474a03c76d75951a4b4c537ced8f1122", true}, {563, "53a518291e91307e43cd8467bb06f986", true},
	{142, "a56a02f843b9bc6ee0b13889249e90e6", true}, {904, "4e40762d3ee97a1c0932e4fa584f89a8", false},
	{445, "5224507db93db513f0ea2a4b4e0578c8", true}, {38, "0c8717ced36216037af657e9d7f8b35b", true},
	{561, "2a8aa76c18d08e1e8be935541f9318c7", false}, {757, "9e3d0f9481dc422cb613ea550897ae71", false},
	{22, "66a66c516ac22054673e5da5e6492545", false}, {172, "84a1ce7bcea3e66194e72b4aa2694e31", true},
	{552, "a811a7def34ca4b98d8e320afd115fad", false}, {546, "e3a345cc8dbb6f014bfa1edad3981820", true},
	{315, "a71effb50e28d27cbdc9892f3765b8c2", false}, {510, "55ee665a3fa22f8ea1b744ce15a7339d", false},
	{230, "7a5006be4d0ce7b542d59f83cd6f1c41", false}, {544, "825b8fb9cfd45867794f4cd8a5a699bd", false},
	{790, "7629ecbea89398bfd9752a2f51c2c137", true}, {555, "de6cdfb44d69e211f886c57120d7bda0", true},
	{147, "a8a5c3bb9205883fae17ead6675b2450", false}, {238, "937e6cb3332dbe87062fa3997f48f425", false},
	{122, "5a357e150995e005847816c431ba502d", false}, {963, "20cb3dcebe2cf8abe6102f4a2e548245", false},
	{141, "1b0afbd09abaaf7996cd26f8f6533795", false}, {666, "3ee60b013303bcfda06be89071b90bd1", true},
	{305, "c90c7cf3471bbc3a804a8a831633705b", true}, {270, "18dda74dfca45a7b0261510f385fb4de", true},
	{381, "600cf70c7bb4918e54aefd78c84f3996", true}, {35, "855f493c5b5b1e2fcbc9993f8061eac8", false},
	{839, "89bc498feb21d969cf0eabf916aa621a", false}, {561, "0a0af00f63e098a39883705a423b0aa8", true},
	{667, "0c38553d71f54dfc37155c22cc8bf243", false}, {603, "49493809d1a49ea879e6aba37afde958", true},
	{92, "eb60d98b8f8fe22d8970f44f0e2b6bad", true}, {70, "19c386ee7a9f2d56ff9ab2e6374540af", false},
	{567, "2a033c15405f1c7a311f653719ed47b7", false}, {936, "62dda24e4be24f5198e4d8dd4010c811", true},
	{210, "bb134e26ee92e282e29cabdb1d00d333", true}, {835, "6c77db08bbded7bdd5c99c6e2fea41d2", false},
	{864, "99f6a7e7b50845b4fb64b7c2ee49f53c", true}, {775, "e908cb91224bee8fd4b5f3632f65717f", true},
	{687, "45a5ace7234d92d9983b4f3858bc0b8e", false}, {761, "8c8a25d232fd4d3a37a5f70ccb82d752", false},
	{400, "54156d7434a894ef07f2a80dbf0f1138", true}, {741, "67e3bfb02b0526dbb79420468d7b83dd", false},
	{871, "f6ea221283dcb42f89bfb15fa33398d2", false}, {244, "b663ca45004decf8123a19fb5d7f7115", true},
	{885, "d0e299d54d6dc6469276fd4e48301d73", true}, {607, "03240c2748aa67a185909a9345d84aba", false},
	{434, "b00de72ba67e6fe0ed661decac911f7e", true}, {889, "20fff68a7cc715b30e4e6d69d53e0f60", false},
	{810, "6bf2bb105e594f6220803da5253551af", false}, {494, "54fbb1d3ebe3883b0a01bbf2c9a2bf3e", true},
	{413, "a8a2ecba129d8537e360cf54de9d7460", false}, {215, "2df034262b775136f2a313fdcc09738a", true},
	{557, "e3c1b943d9c1199d1108a69aa32a4587", false}, {662, "1975d5f5640bac1064d53c2c21e02aae", false},
	{482, "6e4f16727dec3c09539b5f50d35d2c13", false}, {223, "63a088446ef0ed60a9cace4698ede026", false},
	{261, "9b662cd6f67a4e3d1f904b4c5d4275b1", true}, {112, "a2db788dbadc402b8c466b93b8749a6c", true},
	{6, "d6a68b47c66d1f94eed46b8ddc72faf4", false}, {575, "e8a83c42f4515568d0942ec4472c9d2c", true},
	{568, "030e14c2954e3f08134b355f33414ba9", false}, {965, "022315846d42a38322d6fd26250444b3", true},
	{512, "b3ba1ed226288dede87ac1f2ba88de2b", true}, {108, "c57d0dcf43d5b154ef04c7953c94cd12", true},
	{248, "a835fe521d9cbfcfb724b603f87c7403", false}, {46, "eda867e6df95e74abefac336c7f4cd1a", false},
	{879, "09e9e67a261ea3e00d817105b57ffd4e", false}, {853, "6a780cf250cb3d2b699394042e6723a8", false},
	{639, "4c99d7f14c66b3123caf57980f8e2a31", false}, {111, "79dc8d7a54bc3e8ef513b9cd8d830564", true},
	{135, "9c2e5d9d713e5219b0f9e5b884835e69", false}, {209, "3ccb300bf7b983229979e0c46db267b0", true},
	{629, "0bb7b9da64da250c3934bb39130dc990", true}, {910, "b25713ca4cea377871eaa334bc2dd382", true},
	{667, "69afc041003851cec60f41db97e005a9", true}, {449, "c844b5428abe0cf82eaf02566781870a", true},
	{16, "2533c732bed8c1ba4721c25a1205f06c", false}, {936, "ecc770b4be885dfc8d6fa135bc2c93bb", true},
	{595, "63b67cbb42de52e9916241ad94fcd5e8", true}, {83, "fc4998bc53ccd42a5b8e7c86a93d4c88", false},
	{878, "59f0677dffe1a0a8c5895cb263e3a019", false}, {206, "eb897eff9e7c7363e063b340a0c6b315", true},
	{710, "89e4c7e6af305be6cd139abcae953db5", true}, {650, "97563d45ee254231e1ace05fb746bcce", false},
	{233, "3f580864f295ff13f179c3c907032ea9", true}, {836, "e9b78e03706265a6936bff2a41530104", false},
	{568, "c458603ee921fa8711085c15b871b245", false}, {816, "4bbfffab5b5975c1b007ebc518bf416d", false},
	{397, "61a1a65746287d78a431c6848ed1ffb3", false}, {847, "53eee02f4672a72e93369b2c2ecf36eb", false},
	{354, "6ea23c3068a2c304488c8e67a072db97", false}, {961, "eed247645e510ded87bd9afcf1d3e237", false},
	{799, "092af4ff2fdea5bb1c708b2169bdfd95", false}, {99, "497f02db51c898ac441aae18a8b7ced9", false},
	{773, "988481445600bb91bbe23e3103034bcd", true}, {928, "f1813835ac0f456721ef3aac39c0269a", true},
	{235, "1999920085682c007eb3a6984d2a7f05", true}, {460, "60c3b9a2dde734d71ba5cca7eb164bce", true},
}

func TestSampleCollectorVectors(t *testing.T) {
	if len(collectorVectors50) != 100 {
		t.Fatalf("%d vectors", len(collectorVectors50))
	}
	for _, v := range collectorVectors50 {
		s := newSampler(SampleConfig{On: true, Percent: 50, HashSeed: v.seed})
		got, err := s.keep(spanBytes(t, mustTID(v.traceID), "", "", nil))
		if err != nil || got != v.sampled {
			t.Errorf("seed %d trace %s: kept %v (%v), the Collector: %v", v.seed, v.traceID, got, err, v.sampled)
		}
	}
	// The Collector's TestEmptyHashFunction: buckets of no bytes and of 16 zero bytes, seed 0.
	s := newSampler(SampleConfig{On: true})
	if b := fnv1a(s.seeded, nil) & (hashBuckets - 1); b != 0x3515 {
		t.Errorf("bucket of the seed alone %#x, want 0x3515", b)
	}
	if b := s.bucket(make([]byte, 16)); b != 0x2455 {
		t.Errorf("bucket of 16 zero bytes %#x, want 0x2455", b)
	}
}

// A million random trace ids, at percentages that scale unevenly in float32 and with seeds,
// decide as the reference implementation of the Collector's algorithm decides.
func TestSampleMillionTraceIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 5))
	pcts := []float32{0.03, 1, 10, 15.3, 100.0 / 3, 50, 62, 99.99, 100}
	span := spanBytes(t, pcommon.TraceID{1}, "", "", nil)
	// Overwrite the trace id (field 1) in place.
	var tidAt []byte
	for off := 0; off < len(span); {
		f, err := next(span, off)
		if err != nil {
			t.Fatal(err)
		}
		if f.num == 1 {
			tidAt = span[f.val:f.end]
		}
		off = f.end
	}
	if len(tidAt) != 16 {
		t.Fatal("no trace id")
	}
	const n = 1_000_000
	for i := range n {
		pct := pcts[i%len(pcts)]
		seed := uint32(i % 7 * 1009)
		s := newSampler(SampleConfig{On: true, Percent: pct, HashSeed: seed})
		var tid [16]byte
		binary.LittleEndian.PutUint64(tid[:8], r.Uint64())
		binary.LittleEndian.PutUint64(tid[8:], r.Uint64()|1) // never all zero
		copy(tidAt, tid[:])
		got, err := s.keep(span)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceKeep(pct, seed, tid); got != want {
			t.Fatalf("pct %v seed %d trace %x: kept %v, the Collector's algorithm %v", pct, seed, tid, got, want)
		}
	}
}

func TestSampleSpanCases(t *testing.T) {
	tid := mustTID("474a03c76d75951a4b4c537ced8f1122") // kept at 50% with seed 653
	f := func(pct float32, tid pcommon.TraceID, ts, key string, prio any, want bool) {
		t.Helper()
		s := newSampler(SampleConfig{On: true, Percent: pct, HashSeed: 653})
		got, err := s.keep(spanBytes(t, tid, ts, key, prio))
		if err != nil || got != want {
			t.Errorf("pct %v ts %q %s=%v: kept %v (%v), want %v", pct, ts, key, prio, got, err, want)
		}
	}
	// sampling.priority, as the Collector's Test_parseSpanSamplingPriority and
	// Test_tracesamplerprocessor_SpanSamplingPriority read it.
	f(0, tid, "", "sampling.priority", 2, true)
	f(0, tid, "", "sampling.priority", 1.0, true)
	f(0, tid, "", "sampling.priority", "1", true)
	f(0, tid, "", "sampling.priority", "0.5", true)
	f(100, tid, "", "sampling.priority", 0, false)
	f(100, tid, "", "sampling.priority", 0.0, false)
	f(100, tid, "", "sampling.priority", "0", false)
	f(100, tid, "", "sampling.priority", "0.0", false)
	f(0, tid, "", "no.sampling.priority", 2, false)
	f(100, tid, "", "no.sampling.priority", 2, true)
	f(100, tid, "", "sampling.priority", -1, true)     // negative: the hash decides
	f(0, tid, "", "sampling.priority", -1, false)      //
	f(100, tid, "", "sampling.priority", "-0.5", true) //
	f(0, tid, "", "sampling.priority", "NaN", false)   // NaN: the hash decides
	f(0, tid, "", "sampling.priority", true, false)    // a bool: the hash decides
	// Missing randomness (an all-zero trace id) fails closed, at any percentage.
	f(62, pcommon.TraceID{}, "", "", nil, false)
	f(100, pcommon.TraceID{}, "", "", nil, false)
	f(100, pcommon.TraceID{}, "", "sampling.priority", 1, true) // unless the priority says keep
	// The hash_seed mode refuses a tracestate that carries OTel sampling values, or that does
	// not parse, and fails closed.
	f(100, tid, "", "", nil, true)
	f(100, tid, "vendor=abc", "", nil, true)
	f(100, tid, "ot=p:8;x:y", "", nil, true)
	f(100, tid, " vendor=abc , a@b=1,,", "", nil, true)
	f(100, tid, "ot=rv:FD70A3D70A3D71", "", nil, false)
	f(100, tid, "ot=th:8", "", nil, false)
	f(100, tid, "vendor=x,ot=th:c;rv:aaaaaaaaaaaaaa", "", nil, false)
	f(100, tid, "ot=rv:zz", "", nil, false)   // a bad rv is an error too
	f(100, tid, "Vendor=abc", "", nil, false) // upper-case key
	f(100, tid, "vendor=", "", nil, false)    // empty value
	f(100, tid, "vendor=a b ", "", nil, true) // the space after the value is whitespace around the member
	f(100, tid, "ot=p:8;", "", nil, false)    // empty ot member
	f(100, tid, "ot=P:8", "", nil, false)     // upper-case ot key
	f(50, tid, "", "", nil, true)
	f(49, tid, "", "", nil, referenceKeep(49, 653, tid))
}

func TestTracestateLimits(t *testing.T) {
	long := make([]byte, 0, 2048)
	for i := 0; len(long) < 1100; i++ {
		long = fmt.Appendf(long, "k%d=v,", i)
	}
	if !tracestateBlocks(long) {
		t.Error("a tracestate over 1024 bytes passed")
	}
	members := []byte{}
	for i := range 31 {
		members = fmt.Appendf(members, "k%d=v,", i)
	}
	if tracestateBlocks(members[:len(members)-1]) {
		t.Error("31 members blocked")
	}
	if !tracestateBlocks(append(members, "k31=v"...)) {
		t.Error("32 members passed")
	}
}

// Sampling a request leaves every trace complete or absent, removes what it empties, and
// counts what it left out.
func TestSampleRequestKeepsWholeTraces(t *testing.T) {
	c := mustChain(t, Config{Sample: SampleConfig{On: true, Percent: 30, HashSeed: 7}})
	r := rand.New(rand.NewPCG(1, 2))
	tids := make([]pcommon.TraceID, 40)
	for i := range tids {
		binary.LittleEndian.PutUint64(tids[i][:8], r.Uint64())
		binary.LittleEndian.PutUint64(tids[i][8:], r.Uint64())
	}
	td := ptrace.NewTraces()
	perTrace := map[pcommon.TraceID]int{}
	for ri := range 5 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("r", int64(ri))
		rs.ScopeSpans().AppendEmpty() // an empty scope: the Collector removes it
		for si := range 3 {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(fmt.Sprint("scope", si))
			for k := range 8 {
				sp := ss.Spans().AppendEmpty()
				tid := tids[r.IntN(len(tids))]
				sp.SetTraceID(tid)
				sp.SetSpanID(pcommon.SpanID{byte(ri), byte(si), byte(k), 1})
				sp.SetName(fmt.Sprint(ri, si, k))
				perTrace[tid]++
			}
		}
	}
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty() // no trace id: dropped
	in := marshalTraces(t, td)
	outBefore, keptBefore := testutil.ToFloat64(sampledOutSpans), testutil.ToFloat64(sampledKeptSpans)
	out, removed := apply(t, c, fastpath.Traces, in)
	got := unmarshalTraces(t, out)

	// The expected result, computed with pdata: spans of kept traces stay, in order.
	want := ptrace.NewTraces()
	td.CopyTo(want)
	s := newSampler(SampleConfig{On: true, Percent: 30, HashSeed: 7})
	want.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				tid := sp.TraceID()
				return tid.IsEmpty() || !referenceKeep(30, 7, tid) || s.scaled == 0
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	if string(out) != string(marshalTraces(t, want)) {
		t.Fatal("output differs from the Collector's encoding of the sampled request")
	}
	seen := map[pcommon.TraceID]int{}
	rss := got.ResourceSpans()
	for i := range rss.Len() {
		for j := range rss.At(i).ScopeSpans().Len() {
			sps := rss.At(i).ScopeSpans().At(j).Spans()
			if sps.Len() == 0 {
				t.Error("an empty scope was kept")
			}
			for k := range sps.Len() {
				seen[sps.At(k).TraceID()]++
			}
		}
	}
	keptTraces := 0
	for tid, n := range seen {
		if n != perTrace[tid] {
			t.Errorf("trace %x: %d of its %d spans", tid, n, perTrace[tid])
		}
		keptTraces++
	}
	if keptTraces == 0 || keptTraces == len(perTrace) {
		t.Errorf("%d of %d traces kept: the test says nothing", keptTraces, len(perTrace))
	}
	total := td.SpanCount()
	if removed != total-got.SpanCount() {
		t.Errorf("removed %d, want %d", removed, total-got.SpanCount())
	}
	if d := testutil.ToFloat64(sampledOutSpans) - outBefore; int(d) != removed {
		t.Errorf("otlpgate_process_sampled_out_spans_total rose by %v, want %d", d, removed)
	}
	if d := testutil.ToFloat64(sampledKeptSpans) - keptBefore; int(d) != got.SpanCount() {
		t.Errorf("otlpgate_process_sampled_kept_spans_total rose by %v, want %d", d, got.SpanCount())
	}
}

// Sampling and resource edits together: the kept spans' resources carry the edits.
func TestSampleWithResourceEdit(t *testing.T) {
	c := mustChain(t, Config{Set: []Attr{{"edge", "e1"}}, Sample: SampleConfig{On: true, Percent: 50, HashSeed: 653}})
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "s")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Spans().AppendEmpty().SetTraceID(mustTID("474a03c76d75951a4b4c537ced8f1122")) // kept
	ss.Spans().AppendEmpty().SetTraceID(mustTID("4e40762d3ee97a1c0932e4fa584f89a8")) // seed 904 says no; 653?
	out, _ := apply(t, c, fastpath.Traces, marshalTraces(t, td))
	got := unmarshalTraces(t, out)
	wantSpans := 1
	if referenceKeep(50, 653, mustTID("4e40762d3ee97a1c0932e4fa584f89a8")) {
		wantSpans = 2
	}
	if got.SpanCount() != wantSpans {
		t.Errorf("%d spans, want %d", got.SpanCount(), wantSpans)
	}
	if a := attrs(t, got.ResourceSpans().At(0).Resource().Attributes()); a["edge"] != "e1" || a["service.name"] != "s" {
		t.Errorf("%v", a)
	}
}
