package fastpath_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// The full-depth scan is held to the OpenTelemetry Collector's own decoder, the ProtoUnmarshaler
// of go.opentelemetry.io/collector/pdata (the version Collector v0.162 uses): an upstream
// Collector refuses a whole batch for one request its decoder refuses, so the scan must refuse
// every such request before it joins a batch.

// pdataAcceptsMore lists the errors by which the scan refuses what pdata accepts, each on
// purpose:
//   - ErrUTF8: pdata does not check strings, but protobuf-go does, and otlpgate's upstream
//     may be built on it (a Collector's OTLP/HTTP JSON path, other backends);
//   - ErrGroup: pdata skips group-typed unknown fields (not always consistently); no proto3
//     writer produces them;
//   - ErrNesting: pdata has no nesting cap; the scan stops at MaxNesting;
//   - ErrVarintOverflow: pdata drops the excess bits of a 10-byte varint whose last byte is
//     above 1, where protobuf-go refuses it;
//   - ErrFieldNumber: pdata reads field numbers above 2^29-1 (truncated to 32 bits, so that
//     some alias a known field), where protobuf-go refuses them.
var pdataAcceptsMore = []error{fastpath.ErrUTF8, fastpath.ErrGroup, fastpath.ErrNesting, fastpath.ErrVarintOverflow, fastpath.ErrFieldNumber}

// pdataDecode decodes the v1 request b with pdata and returns its resource entries and items.
// For metrics, items are pdata's data points, which count a Metric repeating its data oneof
// member differently (pdata keeps the last occurrence, protobuf merges the repeats): the scan
// counts as protobuf does.
func pdataDecode(sig fastpath.Signal, b []byte) (resources, items int, err error) {
	switch sig {
	case fastpath.Traces:
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			return 0, 0, err
		}
		return td.ResourceSpans().Len(), td.SpanCount(), nil
	case fastpath.Metrics:
		md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
		if err != nil {
			return 0, 0, err
		}
		return md.ResourceMetrics().Len(), md.DataPointCount(), nil
	default:
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
		if err != nil {
			return 0, 0, err
		}
		return ld.ResourceLogs().Len(), ld.LogRecordCount(), nil
	}
}

// checkPdata compares ScanRequest at DepthFull with pdata on b as a v1 request of sig: what the
// scan accepts, pdata accepts, with the same resource entries (and items, but for metrics);
// what pdata accepts, the scan refuses only for the reasons in pdataAcceptsMore.
func checkPdata(t *testing.T, sig fastpath.Signal, b []byte) {
	t.Helper()
	sc, err := fastpath.ScanRequest(sig, b, fastpath.LayoutV1, fastpath.DepthFull)
	resources, items, perr := pdataDecode(sig, b)
	switch {
	case err == nil && perr != nil:
		t.Fatalf("%v: the scan accepts what the Collector's decoder refuses (%v): %x", sig, perr, b)
	case err == nil:
		if sc.Resources != resources || sig != fastpath.Metrics && sc.Items != items {
			t.Fatalf("%v: scan %+v, pdata %d resources, %d items: %x", sig, sc, resources, items, b)
		}
	case perr == nil:
		for _, e := range pdataAcceptsMore {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("%v: the Collector's decoder accepts what the scan refuses with %v: %x", sig, err, b)
	}
}

// fuzzCorpusFiles reads the []byte inputs of the go fuzz corpus files matching pattern.
func fuzzCorpusFiles(tb testing.TB, pattern string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(pattern)
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
			if q, ok := bytes.CutPrefix(line, []byte("[]byte(")); ok {
				s, err := strconv.Unquote(string(bytes.TrimSuffix(q, []byte(")"))))
				if err != nil {
					tb.Fatalf("%s: %v", name, err)
				}
				out = append(out, []byte(s))
			}
		}
	}
	return out
}

// idCase is a request of sig built around the ids the Collector checks.
type idCase struct {
	sig fastpath.Signal
	b   []byte
}

// idCases are requests around the id lengths the Collector checks, in every place an id sits:
// empty, of its size, one byte short or long, of the other id's size, with a non-minimal
// length prefix, repeated.
func idCases() []idCase {
	var out []idCase
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 32} {
		id := make([]byte, n)
		for i := range id {
			id[i] = byte(0xa0 + i)
		}
		out = append(out,
			idCase{fastpath.Traces, spanWith(msg(1, id))},
			idCase{fastpath.Traces, spanWith(msg(2, id))},
			idCase{fastpath.Traces, spanWith(msg(4, id))},
			idCase{fastpath.Traces, spanWith(msg(1, make([]byte, 16)), msg(2, make([]byte, 8)), msg(13, msg(1, id), msg(2, id)))},
			idCase{fastpath.Logs, msg(1, msg(2, msg(2, msg(9, id), msg(10, id))))},
			idCase{fastpath.Metrics, metricsWith(msg(5, msg(1, msg(5, msg(4, id), msg(5, id)))))},
			idCase{fastpath.Metrics, histPointWith(msg(8, msg(5, id), msg(4, id)))},
			idCase{fastpath.Metrics, metricsWith(msg(10, msg(1, msg(11, msg(5, id)))))},
		)
	}
	// The scope entries of OTLP before 0.19 (field 1000 of an entry), which pdata reads.
	out = append(out,
		idCase{fastpath.Traces, msg(1, msg(1000, msg(2, msg(1, make([]byte, 16)), msg(2, make([]byte, 8)))))},
		idCase{fastpath.Traces, msg(1, msg(1000, msg(2, msg(1, make([]byte, 12)))))},
		idCase{fastpath.Metrics, msg(1, msg(1000, msg(2, msg(5, msg(1, msg(5, msg(5, make([]byte, 16))))))))},
		idCase{fastpath.Metrics, msg(1, msg(1000, msg(2, msg(5, msg(1, msg(5, msg(4, make([]byte, 9))))))))},
		idCase{fastpath.Logs, msg(1, msg(1000, msg(2, msg(9, make([]byte, 16)), msg(10, make([]byte, 8)))))},
		idCase{fastpath.Logs, msg(1, msg(1000, msg(2, msg(10, make([]byte, 1)))))},
	)
	return append(out,
		idCase{fastpath.Traces, spanWith([]byte{0x0a, 0x90, 0x00}, make([]byte, 16), []byte{0x12, 0x88, 0x00}, make([]byte, 8))},
		idCase{fastpath.Traces, spanWith([]byte{0x0a, 0x8f, 0x00}, make([]byte, 15))},
		idCase{fastpath.Traces, spanWith(msg(1, make([]byte, 16)), msg(1, make([]byte, 3)))},
	)
}

// pdataSeeds: the id cases, every committed fuzz corpus of fastpath and the OTLP ones of codec,
// the small fixtures, the OTLP/JSON examples transcoded, and the captured KIP-714 metrics
// payloads (MetricsData, laid out as an Export request).
func pdataSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, c := range idCases() {
		seeds = append(seeds, c.b)
	}
	seeds = append(seeds, fuzzCorpusFiles(tb, filepath.Join("testdata", "fuzz", "*", "*"))...)
	seeds = append(seeds, fuzzCorpusFiles(tb, filepath.Join("..", "codec", "testdata", "fuzz", "FuzzUnmarshalTraces", "*"))...)
	for _, fx := range fuzzFixtures(tb) {
		seeds = append(seeds, fx.v1)
	}
	var tr fastpath.JSONTranscoder
	for sig, name := range []string{"traces.json", "metrics.json", "logs.json"} {
		body, err := os.ReadFile(filepath.Join("testdata", "json", name))
		if err != nil {
			tb.Fatal(err)
		}
		out, _, err := tr.AppendRequest(nil, fastpath.Signal(sig), body)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		seeds = append(seeds, out)
	}
	captured, err := filepath.Glob(filepath.Join("..", "server", "kafka", "testdata", "kip714", "*.metricsdata.pb"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, name := range captured {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	// The corpora share some requests.
	seen := map[string]bool{}
	out := seeds[:0]
	for _, b := range seeds {
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	return out
}

func fuzzPdata(f *testing.F, sig fastpath.Signal) {
	for _, b := range pdataSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPdata(t, sig, b) })
}

// FuzzPdataTraces, FuzzPdataMetrics and FuzzPdataLogs hold the full-depth scan to the
// Collector's decoder, one signal each (see checkPdata).
func FuzzPdataTraces(f *testing.F)  { fuzzPdata(f, fastpath.Traces) }
func FuzzPdataMetrics(f *testing.F) { fuzzPdata(f, fastpath.Metrics) }
func FuzzPdataLogs(f *testing.F)    { fuzzPdata(f, fastpath.Logs) }

// TestScanAgreesWithPdata runs the comparison on every seed, and on those up to 512 bytes with
// each byte replaced in turn and cut at every length, for every signal: a deterministic cover
// of the error paths near each field (the larger seeds repeat the smaller ones' fields).
func TestScanAgreesWithPdata(t *testing.T) {
	for _, seed := range pdataSeeds(t) {
		if len(seed) > 512 {
			for _, sig := range signals {
				checkPdata(t, sig, seed)
			}
			continue
		}
		b := make([]byte, len(seed))
		for p := range seed {
			for _, c := range []byte{0x00, 0x7f, 0x80, 0xff, seed[p] ^ 0x08, seed[p] + 1} {
				copy(b, seed)
				b[p] = c
				for _, sig := range signals {
					checkPdata(t, sig, b)
				}
			}
			for _, sig := range signals {
				checkPdata(t, sig, seed[:p])
			}
		}
	}
}

// TestScanRefusesWhatPdataRefusesForIDs checks the id cases one by one against the rule: an id
// neither empty nor of its size is refused by pdata and by the scan (ErrIDLength), at
// DepthFull only.
func TestScanRefusesWhatPdataRefusesForIDs(t *testing.T) {
	refused := 0
	for _, c := range idCases() {
		_, err := fastpath.ScanRequest(c.sig, c.b, fastpath.LayoutV1, fastpath.DepthFull)
		_, _, perr := pdataDecode(c.sig, c.b)
		if (err != nil) != (perr != nil) || err != nil && !errors.Is(err, fastpath.ErrIDLength) {
			t.Fatalf("%v %x: scan %v, pdata %v", c.sig, c.b, err, perr)
		}
		if err != nil {
			refused++
		}
		if _, err := fastpath.ScanRequest(c.sig, c.b, fastpath.LayoutV1, fastpath.DepthResource); err != nil {
			t.Fatalf("%v %x: DepthResource refuses: %v", c.sig, c.b, err)
		}
	}
	if refused == 0 {
		t.Fatal("no id case is refused")
	}
}
