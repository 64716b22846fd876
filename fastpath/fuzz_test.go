package fastpath_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

var updateSeeds = flag.Bool("update", false, "rewrite the committed fuzz seeds under testdata/fuzz")

// seed is one committed seed corpus entry.
type seed struct {
	name string
	id   uint64 // FuzzConvert only
	b    []byte
}

// committedSeeds returns the small real requests committed under testdata/fuzz, where go test
// runs them as part of every test run and the fuzzer starts from them. Larger requests are
// added in code by addSeeds.
func committedSeeds(tb testing.TB) (scan, convert []seed) {
	tb.Helper()
	all := append(fixtures(tb), refFixtures(tb)...)
	for _, fx := range all {
		switch fx.name {
		case "traces-every-field", "metrics-every-type", "logs-every-field", "traces-otlpgen-tiny",
			"traces-reference", "metrics-reference", "logs-reference":
		default:
			continue
		}
		scan = append(scan, seed{name: fx.name, b: fx.v1})
		convert = append(convert, seed{name: fx.name, id: uint64(len(fx.v1)), b: fx.v1})
		if fx.name == "metrics-every-type" || fx.name == "logs-reference" {
			otep := otepMarshal(tb, fx.sig, 1<<40+7, fx.v1)
			scan = append(scan, seed{name: fx.name + "-otep", b: otep})
			convert = append(convert, seed{name: fx.name + "-otep", id: 0, b: otep})
		}
	}
	return scan, convert
}

// corpusFile renders a seed in the go test fuzz corpus format.
func corpusFile(s seed, withID bool) []byte {
	out := []byte("go test fuzz v1\n")
	if withID {
		out = fmt.Appendf(out, "uint64(%d)\n", s.id)
	}
	return fmt.Appendf(out, "[]byte(%q)\n", s.b)
}

// TestFuzzSeeds checks that the committed seeds are the real requests the fixtures build (run
// with -update to rewrite them after a fixture changes).
func TestFuzzSeeds(t *testing.T) {
	scan, convert := committedSeeds(t)
	total := 0
	for _, set := range []struct {
		dir    string
		seeds  []seed
		withID bool
	}{
		{"FuzzScan", scan, false},
		{"FuzzConvert", convert, true},
	} {
		dir := filepath.Join("testdata", "fuzz", set.dir)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range set.seeds {
			path := filepath.Join(dir, s.name)
			want := corpusFile(s, set.withID)
			total += len(want)
			if *updateSeeds {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestFuzzSeeds -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is stale (run go test -run TestFuzzSeeds -update)", path)
			}
		}
	}
	if total > 200<<10 {
		t.Fatalf("committed seeds take %d bytes; keep them under 200 KiB", total)
	}
}

// fuzzFixtures returns the requests small enough to seed a fuzzer with: mutating and minimizing
// a 250 KB batch costs the fuzzer far more than the few field kinds it adds.
func fuzzFixtures(tb testing.TB) []fixture {
	var out []fixture
	for _, fx := range append(fixtures(tb), refFixtures(tb)...) {
		if len(fx.v1) <= 4096 {
			out = append(out, fx)
		}
	}
	return out
}

// FuzzScan feeds arbitrary bytes to ScanRequest for every signal, layout and depth. What
// DepthFull accepts must decode with UnmarshalVT to the same counts; deeper depths accept only
// what shallower ones accept, with the same counts; and what the decoder takes but the scanner
// refuses must be one of the documented ways in which the scanner is stricter.
func FuzzScan(f *testing.F) {
	for _, fx := range fuzzFixtures(f) {
		f.Add(fx.v1)
		f.Add(otepMarshal(f, fx.sig, 3, fx.v1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, sig := range signals {
			for _, layout := range layouts {
				checkScan(t, sig, layout, b)
			}
		}
	})
}

// stricter lists the errors by which ScanRequest may refuse what UnmarshalVT accepts: groups,
// nesting past the cap, packed runs that end inside an element, 10-byte varints whose last byte
// overflows, field numbers above 2^29-1, and ids of a size the Collector refuses.
var stricter = []error{fastpath.ErrUTF8, fastpath.ErrGroup, fastpath.ErrNesting, fastpath.ErrPacked, fastpath.ErrVarintOverflow, fastpath.ErrFieldNumber, fastpath.ErrIDLength}

func checkScan(t *testing.T, sig fastpath.Signal, layout fastpath.Layout, b []byte) {
	t.Helper()
	var got [3]fastpath.Scan
	var errs [3]error
	for i, depth := range depths {
		got[i], errs[i] = fastpath.ScanRequest(sig, b, layout, depth)
		if errs[i] != nil && got[i] != (fastpath.Scan{}) {
			t.Fatalf("%v %v %v: error %v with a non-zero scan %+v", sig, layout, depth, errs[i], got[i])
		}
	}
	for i := 1; i < len(depths); i++ {
		if errs[i] == nil && errs[i-1] != nil {
			t.Fatalf("%v %v: %v accepts what %v rejects (%v)", sig, layout, depths[i], depths[i-1], errs[i-1])
		}
	}
	if errs[0] == nil && got[0].Items != -1 {
		t.Fatalf("%v %v: DepthTop items = %d", sig, layout, got[0].Items)
	}
	if errs[1] == nil {
		top := got[1]
		top.Items = -1
		if top != got[0] {
			t.Fatalf("%v %v: DepthResource %+v vs DepthTop %+v", sig, layout, got[1], got[0])
		}
	}
	if errs[2] == nil && got[2] != got[1] {
		t.Fatalf("%v %v: DepthFull %+v vs DepthResource %+v", sig, layout, got[2], got[1])
	}
	if !got[0].HasID && got[0].ID != 0 {
		t.Fatalf("%v %v: id %d without HasID", sig, layout, got[0].ID)
	}

	d, derr := decode(sig, layout, b)
	if errs[2] != nil && derr == nil && hasLegacyField(layout, b) {
		return // checked by the scan, skipped by the decoder: any error may be right
	}
	if errs[2] == nil {
		if derr != nil {
			t.Fatalf("%v %v: ScanRequest accepts what UnmarshalVT rejects: %v", sig, layout, derr)
		}
		want := wantScan(d, layout, fastpath.DepthFull)
		want.HasID = got[2].HasID // an explicit id 0 is on the wire but not in the message
		if got[2] != want {
			t.Fatalf("%v %v: scan %+v, decoded %+v", sig, layout, got[2], want)
		}
		return
	}
	if derr == nil {
		for _, e := range stricter {
			if errors.Is(errs[2], e) {
				return
			}
		}
		t.Fatalf("%v %v: UnmarshalVT accepts what ScanRequest rejects with %v", sig, layout, errs[2])
	}
}

// hasLegacyField reports whether a resource entry of the request b carries field 1000 (fLegacy),
// which the scan checks at DepthFull and our decoders skip as reserved.
func hasLegacyField(layout fastpath.Layout, b []byte) bool {
	entryNum := protowire.Number(1)
	if layout == fastpath.LayoutOTEP {
		entryNum = 2
	}
	for top := b; len(top) > 0; {
		num, typ, n := protowire.ConsumeTag(top)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, top[n:])
		if m < 0 {
			return false
		}
		if num == entryNum && typ == protowire.BytesType {
			entry, _ := protowire.ConsumeBytes(top[n:])
			for len(entry) > 0 {
				enum, etyp, en := protowire.ConsumeTag(entry)
				if en < 0 {
					break
				}
				if enum == 1000 {
					return true
				}
				em := protowire.ConsumeFieldValue(enum, etyp, entry[en:])
				if em < 0 {
					break
				}
				entry = entry[en+em:]
			}
		}
		top = top[n+m:]
	}
	return false
}

// canonicalV1 returns the well-formed v1 body b with every field-1 tag in its one-byte form:
// what AppendV1 gives back after AppendOTEP.
func canonicalV1(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		num, _, tn := protowire.ConsumeTag(b)
		_, _, n := protowire.ConsumeField(b)
		if num == 1 {
			out = append(out, 0x0a)
			out = append(out, b[tn:n]...)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// FuzzConvert feeds arbitrary bytes to AppendOTEP (as a v1 body) and AppendV1 (as an OTEP
// request). A conversion succeeds exactly when ScanRequest(DepthTop) accepts the input (save
// the v1 field 2 that AppendOTEP refuses), OTEPSize is exact, the round trip is exact up to the
// spelling of tags, the converted request scans to the same counts and errors at every depth,
// and it decodes to the same entries, id and unknown fields.
func FuzzConvert(f *testing.F) {
	for _, fx := range fuzzFixtures(f) {
		f.Add(uint64(1), fx.v1)
		f.Add(uint64(0), otepMarshal(f, fx.sig, 1<<63, fx.v1))
	}
	f.Fuzz(func(t *testing.T, id uint64, b []byte) {
		checkToOTEP(t, id, b)
		checkToV1(t, b)
	})
}

func checkToOTEP(t *testing.T, id uint64, b []byte) {
	_, scanErr := fastpath.ScanRequest(fastpath.Traces, b, fastpath.LayoutV1, fastpath.DepthTop)
	size := fastpath.OTEPSize(id, b)
	dst := make([]byte, 2, 2+size)
	otep, err := fastpath.AppendOTEP(dst, id, b)
	if err != nil {
		if err != fastpath.ErrFieldCollision && err != scanErr {
			t.Fatalf("AppendOTEP: %v; ScanRequest: %v", err, scanErr)
		}
		if len(otep) != 2 {
			t.Fatalf("AppendOTEP failed but returned %d bytes", len(otep))
		}
		if size < len(b) {
			t.Fatalf("OTEPSize %d is no upper bound for a malformed %d-byte body", size, len(b))
		}
		return
	}
	if scanErr != nil {
		t.Fatalf("AppendOTEP converts what ScanRequest rejects: %v", scanErr)
	}
	otep = otep[2:]
	if len(otep) != size || cap(dst) != 2+size {
		t.Fatalf("AppendOTEP wrote %d bytes, OTEPSize said %d", len(otep), size)
	}
	v1, gotID, err := fastpath.AppendV1(nil, otep)
	if err != nil || gotID != id {
		t.Fatalf("AppendV1 of AppendOTEP: id %d, %v; want id %d", gotID, err, id)
	}
	if !bytes.Equal(v1, canonicalV1(b)) {
		t.Fatalf("round trip: %x, want %x", v1, canonicalV1(b))
	}
	if again, _ := fastpath.AppendOTEP(nil, id, v1); !bytes.Equal(again, otep) {
		t.Fatalf("AppendOTEP of the round trip differs")
	}
	for _, sig := range signals {
		for _, depth := range depths {
			s1, e1 := fastpath.ScanRequest(sig, b, fastpath.LayoutV1, depth)
			s2, e2 := fastpath.ScanRequest(sig, otep, fastpath.LayoutOTEP, depth)
			if e1 != e2 {
				t.Fatalf("%v %v: v1 %v, otep %v", sig, depth, e1, e2)
			}
			if e1 == nil {
				s1.ID, s1.HasID = id, id != 0
				if s1 != s2 {
					t.Fatalf("%v %v: v1 %+v, otep %+v", sig, depth, s1, s2)
				}
			}
		}
		if _, err := decode(sig, fastpath.LayoutV1, b); err == nil {
			if err := sameEntries(t, sig, b, otep, id); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func checkToV1(t *testing.T, b []byte) {
	s, scanErr := fastpath.ScanRequest(fastpath.Logs, b, fastpath.LayoutOTEP, fastpath.DepthTop)
	dst := make([]byte, 1, 1+len(b))
	v1, id, err := fastpath.AppendV1(dst, b)
	if err != scanErr {
		t.Fatalf("AppendV1: %v; ScanRequest: %v", err, scanErr)
	}
	if err != nil {
		if len(v1) != 1 || id != 0 {
			t.Fatalf("AppendV1 failed but returned %d bytes, id %d", len(v1), id)
		}
		return
	}
	v1 = v1[1:]
	if len(v1) > len(b) || cap(dst) != 1+len(b) {
		t.Fatalf("AppendV1 grew %d bytes to %d", len(b), len(v1))
	}
	if id != s.ID {
		t.Fatalf("AppendV1 id %d, ScanRequest id %d", id, s.ID)
	}
	otep, err := fastpath.AppendOTEP(nil, id, v1)
	if err != nil {
		t.Fatalf("AppendOTEP of AppendV1: %v", err)
	}
	if back, backID, err := fastpath.AppendV1(nil, otep); err != nil || backID != id || !bytes.Equal(back, v1) {
		t.Fatalf("AppendV1 of the round trip: id %d, %v", backID, err)
	}
	for _, sig := range signals {
		if _, err := decode(sig, fastpath.LayoutOTEP, b); err == nil {
			if err := sameEntries(t, sig, v1, b, id); err != nil {
				t.Fatal(err)
			}
		}
	}
}
