package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcollogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	rcolmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	rcoltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// idKeys are the fields the OTLP/JSON mapping writes in hex rather than protobuf JSON's base64.
var idKeys = map[string]bool{
	"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true,
}

// int64Keys are the 64-bit integer fields protojson writes as strings, which OTLP/JSON clients
// also send as bare numbers.
var int64Keys = map[string]bool{
	"timeUnixNano": true, "startTimeUnixNano": true, "endTimeUnixNano": true,
	"observedTimeUnixNano": true, "intValue": true, "asInt": true, "count": true,
	"zeroCount": true, "bucketCounts": true,
	"time_unix_nano": true, "start_time_unix_nano": true, "end_time_unix_nano": true,
	"observed_time_unix_nano": true, "int_value": true, "as_int": true, "zero_count": true,
	"bucket_counts": true,
}

// renderOTLPJSON writes m as an OTLP/HTTP client would: protojson's rendering with the ids
// turned into hex. r varies what the specification and the Collector allow: upper or lower
// case hex, integer enums or their names, lowerCamelCase or snake_case keys, 64-bit integers
// as strings or numbers, unknown fields sprinkled in. Keys come out sorted, not in field order,
// which the transcoder must put right.
func renderOTLPJSON(m proto.Message, r *rand.Rand) ([]byte, error) {
	opts := protojson.MarshalOptions{UseEnumNumbers: r.IntN(2) == 0, UseProtoNames: r.IntN(3) == 0}
	b, err := opts.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep every number's text as protojson wrote it
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	upper := r.IntN(2) == 0
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && idKeys[k] {
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						return fmt.Errorf("%s: %w", k, err)
					}
					h := hex.EncodeToString(raw)
					if upper {
						h = strings.ToUpper(h)
					}
					v[k] = h
					continue
				}
				if int64Keys[k] && r.IntN(2) == 0 {
					v[k] = numbersOf(x)
				}
				if err := walk(x); err != nil {
					return err
				}
			}
			if r.IntN(8) == 0 {
				v["someFutureField"] = map[string]any{"nested": []any{1, "two", nil, true}}
			}
		case []any:
			for _, x := range v {
				if err := walk(x); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(tree); err != nil {
		return nil, err
	}
	return json.Marshal(tree)
}

// numbersOf turns a decimal string, or an array of them, into bare JSON numbers.
func numbersOf(x any) any {
	switch x := x.(type) {
	case string:
		return json.Number(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = numbersOf(e)
		}
		return out
	}
	return x
}

// TestJSONConformance renders random requests of every signal to OTLP/JSON and transcodes
// them back: the bytes must be exactly the reference's deterministic encoding (hence decode
// with the reference bindings to a message proto.Equal to the original), and the Scan must be
// what ScanRequest at DepthFull reports for them. One transcoder serves every seed, as a
// pooled one would.
func TestJSONConformance(t *testing.T) {
	sigs := []struct {
		name   string
		sig    fastpath.Signal
		stream uint64
		gen    func(*gen) proto.Message
		empty  func() proto.Message
	}{
		{"traces", fastpath.Traces, 101, func(g *gen) proto.Message { return g.traceRequest() },
			func() proto.Message { return &rcoltrace.ExportTraceServiceRequest{} }},
		{"metrics", fastpath.Metrics, 102, func(g *gen) proto.Message { return g.metricsRequest() },
			func() proto.Message { return &rcolmetrics.ExportMetricsServiceRequest{} }},
		{"logs", fastpath.Logs, 103, func(g *gen) proto.Message { return g.logsRequest() },
			func() proto.Message { return &rcollogs.ExportLogsServiceRequest{} }},
	}
	var tr fastpath.JSONTranscoder
	for _, s := range sigs {
		t.Run(s.name, func(t *testing.T) {
			items := 0
			for _, seed := range seeds(300) {
				g := newGen(seed, s.stream)
				g.wellFormedIDs = true // TestJSONRefusesMalformedIDs takes the others
				ref := s.gen(g)
				want, err := deterministic.Marshal(ref)
				if err != nil {
					t.Fatal(err)
				}
				body, err := renderOTLPJSON(ref, g.r)
				if err != nil {
					t.Fatalf("seed %d: render: %v", seed, err)
				}
				prefix := []byte("prefix")
				got, scan, err := tr.AppendRequest(prefix, s.sig, body)
				if err != nil {
					t.Fatalf("seed %d (replay with -conformance.seed=%d): %v\n%s", seed, seed, err, body)
				}
				if !bytes.HasPrefix(got, []byte("prefix")) {
					t.Fatalf("seed %d: dst prefix overwritten", seed)
				}
				got = got[len("prefix"):]
				back := s.empty()
				if err := proto.Unmarshal(got, back); err != nil {
					t.Fatalf("seed %d: reference cannot decode the transcoded bytes: %v", seed, err)
				}
				if !proto.Equal(back, ref) {
					t.Fatalf("seed %d (replay with -conformance.seed=%d): decoded message differs\nbody: %s\ngot:  %v\nwant: %v",
						seed, seed, body, back, ref)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d (replay with -conformance.seed=%d): bytes not canonical\ngot:  %x\nwant: %x",
						seed, seed, got, want)
				}
				wantScan, err := fastpath.ScanRequest(s.sig, got, fastpath.LayoutV1, fastpath.DepthFull)
				if err != nil {
					t.Fatalf("seed %d: ScanRequest refuses the transcoded bytes: %v", seed, err)
				}
				if scan != wantScan {
					t.Fatalf("seed %d: Scan %+v, ScanRequest says %+v", seed, scan, wantScan)
				}
				items += scan.Items
			}
			if items == 0 {
				t.Fatal("no items transcoded: the generator is broken")
			}
		})
	}
}

// malformedID reports whether m, or a message in it, holds a trace id that is neither empty nor
// 16 bytes or a span id neither empty nor 8 bytes.
func malformedID(m protoreflect.Message) bool {
	bad := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.BytesKind && !fd.IsList():
			size := map[protoreflect.Name]int{"trace_id": 16, "span_id": 8, "parent_span_id": 8}[fd.Name()]
			if n := len(v.Bytes()); size != 0 && n != 0 && n != size {
				bad = true
			}
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			for i := range v.List().Len() {
				bad = bad || malformedID(v.List().Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			bad = bad || malformedID(v.Message())
		}
		return !bad
	})
	return bad
}

// TestJSONRefusesMalformedIDs renders random requests whose ids may have any length: the
// transcoder refuses (fastpath.ErrIDLength) exactly those holding an id of a length the
// Collector's decoder refuses, as the full-depth scan does for protobuf, and transcodes the
// others.
func TestJSONRefusesMalformedIDs(t *testing.T) {
	sigs := []struct {
		sig    fastpath.Signal
		stream uint64
		gen    func(*gen) proto.Message
	}{
		{fastpath.Traces, 201, func(g *gen) proto.Message { return g.traceRequest() }},
		{fastpath.Metrics, 202, func(g *gen) proto.Message { return g.metricsRequest() }},
		{fastpath.Logs, 203, func(g *gen) proto.Message { return g.logsRequest() }},
	}
	var tr fastpath.JSONTranscoder
	for _, s := range sigs {
		t.Run(s.sig.String(), func(t *testing.T) {
			refused, passed := 0, 0
			ss := seeds(150)
			for _, seed := range ss {
				g := newGen(seed, s.stream)
				ref := s.gen(g)
				body, err := renderOTLPJSON(ref, g.r)
				if err != nil {
					t.Fatalf("seed %d: render: %v", seed, err)
				}
				_, _, err = tr.AppendRequest(nil, s.sig, body)
				if malformedID(ref.ProtoReflect()) {
					if !errors.Is(err, fastpath.ErrIDLength) {
						t.Fatalf("seed %d: a request with a malformed id: %v, want ErrIDLength\n%s", seed, err, body)
					}
					refused++
					continue
				}
				if err != nil {
					t.Fatalf("seed %d: %v\n%s", seed, err, body)
				}
				passed++
			}
			if len(ss) > 1 && (refused == 0 || passed == 0) {
				t.Fatalf("%d refused, %d transcoded: the generator no longer makes both kinds", refused, passed)
			}
		})
	}
}
