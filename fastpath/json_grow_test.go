package fastpath

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// testGrower gives buffers of twice the capacity, or the room asked for when that is more, up
// to max bytes, and records them.
type testGrower struct {
	max   int
	cur   []byte // the buffer the output is in: the first one, then the last one given
	given [][]byte
	// strays counts the calls whose dst was not in cur: the transcoder wrote past a buffer's
	// capacity without asking, and append moved it.
	strays int
}

// errGrowRefused is a grower's refusal, as the intake limiter's budget refuses.
var errGrowRefused = errors.New("refused")

func (g *testGrower) Grow(dst []byte, n int) ([]byte, error) {
	if cap(dst) != cap(g.cur) || len(dst) > 0 && &dst[0] != &g.cur[:1][0] {
		g.strays++
	}
	if len(dst)+n > g.max {
		return dst, errGrowRefused
	}
	nb := append(make([]byte, 0, max(2*cap(dst), len(dst)+n)), dst...)
	g.given = append(g.given, nb)
	g.cur = nb
	return nb, nil
}

// With a Grower, the transcoder writes only into buffers it was given: before it writes past
// a buffer's capacity it asks for room, for packed numbers that write four times their text,
// long strings, attributes, ids and deferred length prefixes alike, and its output is the one
// AppendRequest writes. A Grower that refuses ends the call with its error, the output
// returned at its original length.
func TestJSONOutputGrowsThroughGrower(t *testing.T) {
	long := strings.Repeat("s", 10000)
	bodies := []struct {
		name string
		sig  Signal
		body []byte
	}{
		{"packed fixed64", Metrics, repeatJSON(1<<20, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"dataPoints":[{"bucketCounts":[`, `0`, `,`, `]}]}}]}]}]}`)},
		{"packed doubles", Metrics, repeatJSON(1<<20, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"explicitBounds":[`, `1`, `,`, `]}]}}]}]}]}`)},
		{"long strings and attributes", Traces, repeatJSON(1<<20, `{"resourceSpans":[{"scopeSpans":[{"spans":[`,
			`{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"`+long+`","attributes":[{"key":"k","value":{"stringValue":"`+long+`"}}]}`, `,`, `]}]}]}`)},
		{"escaped strings and bytes", Logs, repeatJSON(1<<20, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[`,
			`{"body":{"stringValue":"\u0041`+long+`"}},{"body":{"bytesValue":"`+strings.Repeat("QUJD", 500)+`"}}`, `,`, `]}]}]}`)},
		{"empty objects", Logs, repeatJSON(1<<20, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[`, `{}`, `,`, `]}]}]}`)},
	}
	for _, tc := range bodies {
		t.Run(tc.name, func(t *testing.T) {
			var tr JSONTranscoder
			want, ws, err := tr.AppendRequest(nil, tc.sig, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			g := &testGrower{max: 1 << 30, cur: make([]byte, 0, 64)}
			got, gs, err := tr.AppendRequestWithin(g, g.cur, tc.sig, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || gs != ws {
				t.Fatalf("output of %d bytes (%+v) differs from AppendRequest's %d (%+v)", len(got), gs, len(want), ws)
			}
			if cap(got) != cap(g.cur) || &got[:1][0] != &g.cur[:1][0] || g.strays != 0 {
				t.Errorf("the output left the buffers the grower gave: %d of %d growths asked from another buffer, the result in the last one: %v",
					g.strays, len(g.given), cap(got) == cap(g.cur))
			}
			t.Logf("%d bytes of JSON, %d of protobuf, %d growths", len(tc.body), len(got), len(g.given))

			refuse := &testGrower{max: len(want) / 2, cur: make([]byte, 3, 64)}
			out, _, err := tr.AppendRequestWithin(refuse, refuse.cur, tc.sig, tc.body)
			if !errors.Is(err, errGrowRefused) || len(out) != 3 {
				t.Errorf("a grower that refuses: %v, %d bytes; want ErrBudget, 3 bytes", err, len(out))
			}
		})
	}
}
