package kafka

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// Encoders for hand-made payloads that no marshaller would write: repeated occurrences of
// one message field, oneof members that replace or merge into one another, unknown fields.
func field(num protowire.Number, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(body)))
	return append(b, body...)
}

func str(num protowire.Number, s string) []byte { return field(num, []byte(s)) }

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// kvField is a Resource attribute (field 1) with a string value.
func kvField(k, v string) []byte { return field(1, str(1, k), field(2, str(1, v))) }

// numberPoints is a Gauge or Sum body with n data points.
func numberPoints(n int) []byte {
	var b []byte
	for i := range n {
		b = append(b, field(1, varintField(8, uint64(i)))...)
	}
	return b
}

// rewriteLabels are label values as an instance would hold them.
var rewriteLabels = [len(labelNames)]string{"id-1", "app", "librdkafka", "2.15.1", "127.0.0.1", "4242"}

// forwardOutcome is what one forward did and what its consumer received.
type forwardOutcome struct {
	points int
	sent   bool
	err    error
	body   *metricsv1.MetricsData
	items  int
}

func runForward(t testing.TB, fn func(pipeline.Consumer, []byte, *plan, []*commonv1.KeyValue, int) (int, bool, error), payload []byte, p *plan) forwardOutcome {
	t.Helper()
	rec := &testkit.Recorder{}
	var o forwardOutcome
	o.points, o.sent, o.err = fn(rec, payload, p, labelAttrs(&rewriteLabels), 1<<30)
	if n, md, items := lastMetrics(t, rec); n > 0 {
		o.body, o.items = md, items
	}
	return o
}

// checkSame fails unless the wire rewrite and the decoding path agree on payload: the same
// error, points and items, and bodies that decode to equal messages.
func checkSame(t testing.TB, payload []byte, p *plan) forwardOutcome {
	t.Helper()
	got := runForward(t, forward, payload, p)
	want := runForward(t, forwardDecoded, payload, p)
	if got.err != want.err || got.points != want.points || got.sent != want.sent || got.items != want.items {
		t.Fatalf("rewrite: points %d sent %v items %d err %v; decoded: points %d sent %v items %d err %v",
			got.points, got.sent, got.items, got.err, want.points, want.sent, want.items, want.err)
	}
	// Bodies compare as marshalled bytes: EqualVT compares doubles with ==, and a gauge of NaN
	// (which clients do send, e.g. a latency average with no samples) is unequal to itself.
	if (got.body == nil) != (want.body == nil) || (got.body != nil && !sameMessage(got.body, want.body)) {
		t.Fatalf("bodies differ\nrewrite: %v\ndecoded: %v", got.body, want.body)
	}
	return got
}

func rewritePlans() map[string]*plan {
	return map[string]*plan{
		"all":  {all: true},
		"none": {},
		"some": {prefixes: []string{"b", "org.apache.kafka.consumer.", "org.apache.kafka.producer.node"}},
	}
}

func TestRewriteMatchesDecoded(t *testing.T) {
	gauge := func(name string, n int) []byte { return field(2, str(1, name), field(5, numberPoints(n))) }
	sum := func(name string, n int) []byte { return field(2, str(1, name), field(7, numberPoints(n))) }
	labelled := field(1, kvField("client_id", "spoofed"), kvField("host", "h1"), varintField(2, 3))
	for _, tc := range []struct {
		name    string
		payload []byte
		plan    string
		points  int // of the rewrite, asserted exactly
		sent    bool
	}{
		{"empty", nil, "all", 0, false},
		{"one gauge", field(1, labelled, field(2, gauge("a", 2))), "all", 2, true},
		{"no resource", field(1, field(2, gauge("a", 1))), "all", 1, true},
		{"resource twice, around the scopes", field(1, labelled, field(2, gauge("a", 1)), field(1, kvField("client_port", "1"), kvField("zone", "z"))), "all", 1, true},
		{"filtered out", field(1, labelled, field(2, gauge("a", 3))), "some", 0, false},
		{"one scope of two kept", field(1, labelled, field(2, gauge("a", 3)), field(2, sum("b.x", 2), str(3, "url"))), "some", 2, true},
		{"one resource of two kept", append(field(1, labelled, field(2, gauge("a", 1))), field(1, field(2, sum("b.y", 2)))...), "some", 2, true},
		{"oneof replaced", field(1, field(2, field(2, str(1, "b"), field(5, numberPoints(4)), field(7, numberPoints(1)), field(5, numberPoints(2))))), "all", 2, true},
		{"oneof merged", field(1, field(2, field(2, str(1, "b"), field(7, numberPoints(2)), field(7, numberPoints(3))))), "all", 5, true},
		{"name repeated", field(1, field(2, field(2, str(1, "a"), field(5, numberPoints(1)), str(1, "b")))), "some", 1, true},
		{"unknown fields kept", field(1, varintField(9, 7), field(2, varintField(8, 1), gauge("b", 1), str(12, "meta")), str(3, "url")), "some", 1, true},
		{"empty scope", field(1, field(2), field(2, gauge("b", 1))), "all", 1, true},
		{"unknown top-level field", append(field(1, field(2, gauge("b", 1))), varintField(2, 1)...), "all", 0, false},
		{"truncated", field(1, field(2, gauge("b", 1)))[:7], "all", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSame(t, tc.payload, rewritePlans()[tc.plan])
			if got.points != tc.points || got.sent != tc.sent {
				t.Fatalf("points %d sent %v (err %v), want %d %v", got.points, got.sent, got.err, tc.points, tc.sent)
			}
		})
	}
}

// TestRewriteCaptures holds the rewrite to the decoding path on every real push, under plans
// that keep all, none and some of its metrics.
func TestRewriteCaptures(t *testing.T) {
	for _, file := range captureFiles(t) {
		pc := loadCapture(t, file)
		for name, p := range rewritePlans() {
			t.Run(fmt.Sprintf("%s/%s", pc.name, name), func(t *testing.T) {
				got := checkSame(t, pc.wantBytes, p)
				if name == "all" && got.points != points(pc.want) {
					t.Fatalf("points %d, want %d", got.points, points(pc.want))
				}
			})
		}
	}
}

// FuzzRewrite holds the wire rewrite to the decoding path on any payload.
func FuzzRewrite(f *testing.F) {
	for _, file := range captureFiles(f) {
		f.Add(loadCapture(f, file).wantBytes, uint8(2))
	}
	f.Add(field(1, field(1, kvField("client_id", "x")), field(2, field(2, str(1, "b"), field(5, numberPoints(2))))), uint8(0))
	f.Fuzz(func(t *testing.T, payload []byte, which uint8) {
		p := []*plan{{all: true}, {}, rewritePlans()["some"]}[int(which)%3]
		checkSame(t, payload, p)
	})
}

// sameMessage reports whether a and b marshal to the same bytes.
func sameMessage(a, b interface{ MarshalVT() ([]byte, error) }) bool {
	ab, aerr := a.MarshalVT()
	bb, berr := b.MarshalVT()
	return aerr == nil && berr == nil && bytes.Equal(ab, bb)
}
