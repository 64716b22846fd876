package fastpath_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// corpusSeeds reads the byte inputs of every committed fuzz corpus under testdata/fuzz.
func corpusSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range bytes.Split(text, []byte("\n")) {
			q, ok := bytes.CutPrefix(line, []byte("[]byte("))
			if !ok {
				continue
			}
			s, err := strconv.Unquote(string(bytes.TrimSuffix(q, []byte(")"))))
			if err != nil {
				tb.Fatalf("%s: %v", name, err)
			}
			out = append(out, []byte(s))
		}
	}
	if len(out) == 0 {
		tb.Fatal("no committed fuzz seeds found")
	}
	return out
}

// equivalenceSeeds: the committed corpora, the small fixtures, and short requests with strings
// outside ASCII, valid and not.
func equivalenceSeeds(tb testing.TB) [][]byte {
	seeds := corpusSeeds(tb)
	for _, fx := range fuzzFixtures(tb) {
		seeds = append(seeds, fx.v1)
	}
	for _, s := range []string{"Grüße ✓ 日本語 🚀", "bad \xff", "\xed\xa0\x80", "\xf4\x90\x80\x80", "abcdefg\xc3"} {
		seeds = append(seeds, utf8Request(s))
	}
	return append(seeds, attributeSeeds()...)
}

// attributeSeeds are requests whose attributes sit on and around the edges of the walkers'
// fast path for a short key with a short string or a small int (fastpath/internal/gen's
// shortString): the shortest and longest KeyValue it takes and one byte past, ints of one to
// four bytes and negative, the other AnyValue members, text outside ASCII in key or value, a
// second member after the value, and KeyValues in kvlists nested up to and past MaxNesting;
// in spans, resources, events, log records and data points. TestScanEquivalenceMutations
// replaces each byte of each and cuts each at every length.
func attributeSeeds() [][]byte {
	str := func(k, v string) []byte { return msg(1, msg(1, []byte(k)), msg(2, msg(1, []byte(v)))) }
	num := func(k string, n uint64) []byte { return msg(1, msg(1, []byte(k)), msg(2, varintField(3, n))) }
	attrs := cat(
		str("", ""), str(strings.Repeat("k", 30), strings.Repeat("v", 30)), str(strings.Repeat("k", 30), strings.Repeat("v", 31)),
		str("é", "v"), str("k", "é"), str("http.route", "/api/v1/orders/{orderId}"),
		num("a", 0), num("b", 127), num("c", 128), num("d", 16383), num("e", 16384), num("f", 1<<21), num("g", 1<<63),
		num(strings.Repeat("k", 58), 1<<20), num(strings.Repeat("k", 59), 1<<20),
		msg(1, msg(1, []byte("bool")), msg(2, varintField(2, 1))),
		msg(1, msg(1, []byte("double")), msg(2, fixed64Field(4, 1))),
		msg(1, msg(1, []byte("bytes")), msg(2, msg(7, []byte{0xff}))),
		msg(1, msg(1, []byte("two")), msg(2, msg(1, []byte("s")), varintField(3, 1))),
		msg(1, msg(1, []byte("extra")), msg(2, msg(1, []byte("s"))), varintField(3, 1)),
	)
	// Each attribute's field number differs by message: retag the list for each.
	retag := func(num protowire.Number) []byte {
		var out []byte
		for rest := attrs; len(rest) > 0; {
			_, _, n := protowire.ConsumeTag(rest)
			v, m := protowire.ConsumeBytes(rest[n:])
			out = protowire.AppendBytes(protowire.AppendTag(out, num, protowire.BytesType), v)
			rest = rest[n+m:]
		}
		return out
	}
	seeds := [][]byte{
		spanWith(retag(9)),                                        // span attributes
		msg(1, msg(1, retag(1)), msg(2, msg(2))),                  // resource attributes
		spanWith(msg(11, retag(3))),                               // event attributes
		msg(1, msg(2, msg(2, retag(6)))),                          // log record attributes
		metricsWith(msg(5, msg(1, retag(7), fixed64Field(4, 1)))), // gauge data point attributes
	}
	// A string attribute inside kvlists nested ever deeper, up to and past the cap, under no,
	// one and two arrays, so that some KeyValue sits just below the cap (a kvlist adds three
	// levels, an array two).
	for arrays := range 3 {
		for levels := range fastpath.MaxNesting/3 + 2 {
			v := msg(1, []byte("leaf"))
			for range levels {
				v = msg(6, msg(1, msg(1, []byte("k")), msg(2, v))) // kvlist_value.values: a KeyValue
			}
			for range arrays {
				v = msg(5, msg(1, v)) // array_value.values
			}
			seeds = append(seeds, msg(1, msg(2, msg(2, msg(5, v)))))
		}
	}
	return seeds
}

// utf8Request is a one-span request with s as span name, attribute key and attribute value.
func utf8Request(s string) []byte {
	kv := msg(9, msg(1, []byte(s)), msg(2, msg(1, []byte(s))))
	return spanWith(msg(5, []byte(s)), kv)
}

// FuzzScanEquivalence compares the generated walkers with the reference walker, which
// interprets the schema table: on the input as a request (ScanRequest against the reference's
// ScanRequest, every signal, layout and depth) and on the input and each of its top-level
// length-delimited fields as a resource entry. Both must return the same counts, and on an
// entry the same error value. It also holds DepthFull to protobuf-go's Unmarshal, which checks UTF-8 itself.
func FuzzScanEquivalence(f *testing.F) {
	for _, b := range equivalenceSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkEquivalence(t, b)
		for _, sig := range signals {
			checkProtobuf(t, sig, fastpath.LayoutV1, b)
			checkProtobuf(t, sig, fastpath.LayoutOTEP, b)
		}
	})
}

// TestScanEquivalenceMutations runs the walker comparison on every small fixture with each byte
// replaced in turn, and cut at every length: deterministic cover of the error paths.
func TestScanEquivalenceMutations(t *testing.T) {
	for _, seed := range equivalenceSeeds(t) {
		if len(seed) > 1024 {
			continue
		}
		b := make([]byte, len(seed))
		for p := range seed {
			for _, c := range []byte{0x00, 0x7f, 0x80, 0xff, seed[p] ^ 0x07} {
				copy(b, seed)
				b[p] = c
				checkEquivalence(t, b)
			}
			checkEquivalence(t, seed[:p])
		}
	}
}

func checkEquivalence(t *testing.T, b []byte) {
	t.Helper()
	for _, sig := range signals {
		for _, layout := range layouts {
			for _, depth := range depths[1:] {
				got, err := fastpath.ScanRequest(sig, b, layout, depth)
				want, wantErr := fastpath.RefScanRequest(sig, b, layout, depth)
				// The reference's top level is the old one: a malformed top level may be named
				// by another error (TopLevel reads a length before judging the wire type of
				// an OTEP id); accepting, rejecting and the counts must agree. Entries are
				// compared error for error below.
				if got != want || (err == nil) != (wantErr == nil) {
					t.Fatalf("%v %v %v on %x: %+v, %v; reference %+v, %v", sig, layout, depth, b, got, err, want, wantErr)
				}
			}
		}
		entries := [][]byte{b}
		for rest := b; len(rest) > 0; {
			_, typ, n := protowire.ConsumeTag(rest)
			if n < 0 {
				break
			}
			m := protowire.ConsumeFieldValue(0, typ, rest[n:])
			if m < 0 {
				break
			}
			if typ == protowire.BytesType {
				v, _ := protowire.ConsumeBytes(rest[n:])
				entries = append(entries, v)
			}
			rest = rest[n+m:]
		}
		for _, e := range entries {
			for _, full := range []bool{false, true} {
				got, err := fastpath.WalkEntry(sig, e, full)
				want, wantErr := fastpath.RefWalkEntry(sig, e, full)
				if err != wantErr || err == nil && got != want {
					t.Fatalf("%v entry (full %v) %x: %d, %v; reference %d, %v", sig, full, e, got, err, want, wantErr)
				}
			}
		}
	}
}

// protobufRejectsMore lists the errors by which ScanRequest refuses what protobuf-go's
// Unmarshal accepts: stricter, as with UnmarshalVT (fuzz_test.go), and wire types, which
// protobuf-go takes for an unknown field when they do not match the schema.
var protobufRejectsMore = []error{fastpath.ErrGroup, fastpath.ErrNesting, fastpath.ErrPacked, fastpath.ErrVarintOverflow, fastpath.ErrFieldNumber, fastpath.ErrWireType, fastpath.ErrIDLength}

// checkProtobuf holds DepthFull to protobuf-go's Unmarshal of our types, which refuses strings
// that are not UTF-8: what the scan accepts, Unmarshal accepts; what Unmarshal accepts, the scan
// refuses only for the reasons above, never for UTF-8; and a scan refused for UTF-8 is refused
// by Unmarshal.
func checkProtobuf(t *testing.T, sig fastpath.Signal, layout fastpath.Layout, b []byte) {
	t.Helper()
	_, err := fastpath.ScanRequest(sig, b, layout, fastpath.DepthFull)
	perr := protoUnmarshal(sig, layout, b)
	switch {
	case err == nil && perr != nil:
		t.Fatalf("%v %v: the scan accepts what protobuf-go refuses (%v): %x", sig, layout, perr, b)
	case err == fastpath.ErrUTF8 && perr == nil:
		t.Fatalf("%v %v: the scan refuses as not UTF-8 what protobuf-go accepts: %x", sig, layout, b)
	case err != nil && perr == nil:
		if hasLegacyField(layout, b) {
			return // the scan checks field 1000 of an entry, which protobuf-go skips as reserved
		}
		for _, e := range protobufRejectsMore {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("%v %v: protobuf-go accepts what the scan refuses with %v: %x", sig, layout, err, b)
	}
}

// protoUnmarshal decodes b with protobuf-go (not vtprotobuf) into our request types.
func protoUnmarshal(sig fastpath.Signal, layout fastpath.Layout, b []byte) error {
	var m proto.Message
	switch {
	case sig == fastpath.Traces && layout == fastpath.LayoutV1:
		m = &coltracev1.ExportTraceServiceRequest{}
	case sig == fastpath.Traces:
		m = &otepv1.TraceExportRequest{}
	case sig == fastpath.Metrics && layout == fastpath.LayoutV1:
		m = &colmetricsv1.ExportMetricsServiceRequest{}
	case sig == fastpath.Metrics:
		m = &otepv1.MetricExportRequest{}
	case layout == fastpath.LayoutV1:
		m = &collogsv1.ExportLogsServiceRequest{}
	default:
		m = &otepv1.LogExportRequest{}
	}
	return proto.Unmarshal(b, m)
}
