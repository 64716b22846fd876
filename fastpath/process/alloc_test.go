//go:build !race

package process

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// Every step, and all of them together, runs on a request without allocating.
func TestStepsAllocateNothing(t *testing.T) {
	req := benchRequest(t, 2)
	dst := make([]byte, 0, 2*len(req))
	for _, sc := range stepConfigs {
		c := mustChain(t, sc.cfg)
		if _, err := run(c, fastpath.Traces, req, dst); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() {
			if _, err := run(c, fastpath.Traces, req, dst); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per request", sc.name, n)
		}
	}
}

// Consistent sampling allocates nothing per request, whether it writes a new th into every
// span it keeps, multiplies the one spans arrived with, finds them carrying the threshold it
// would write (then the request passes byte for byte), or makes room for it in tracestates at
// their limits; nor does sampling log records.
func TestConsistentSamplingAllocatesNothing(t *testing.T) {
	fresh := benchRequest(t, 2)
	equal := tieredRequest(t, SampleEqualizing, 30)
	halved := tieredRequest(t, SampleProportional, 50)
	limits, _ := limitRequest(t)
	for _, c := range []struct {
		name string
		sc   SampleConfig
		req  []byte
		same bool // the request passes as it came
	}{
		{"proportional, new thresholds", SampleConfig{Mode: SampleProportional, Percent: 30}, fresh, false},
		{"proportional, arriving thresholds", SampleConfig{Mode: SampleProportional, Percent: 30}, halved, false},
		{"equalizing, new thresholds", SampleConfig{Mode: SampleEqualizing, Percent: 30}, fresh, false},
		{"equalizing, equal thresholds", SampleConfig{Mode: SampleEqualizing, Percent: 30}, equal, true},
		{"equalizing, tracestates at the limits", SampleConfig{Mode: SampleEqualizing, Percent: 30}, limits, false},
		{"proportional, tracestates at the limits", SampleConfig{Mode: SampleProportional, Percent: 30}, limits, false},
	} {
		c.sc.On = true
		ch := mustChain(t, Config{Sample: c.sc})
		dst := make([]byte, 0, 3*len(c.req))
		out, err := run(ch, fastpath.Traces, c.req, dst)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 || (string(out) == string(c.req)) != c.same {
			t.Fatalf("%s: %d bytes out of %d, unchanged %v", c.name, len(out), len(c.req), string(out) == string(c.req))
		}
		if c.same {
			// Not rewritten into the same bytes either: the spans are copied as they came.
			if n := rewrittenSpans(t, ch, c.req); n != 0 {
				t.Errorf("%s: %d spans rewritten", c.name, n)
			}
		}
		if n := testing.AllocsPerRun(200, func() {
			if _, err := run(ch, fastpath.Traces, c.req, dst); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per request", c.name, n)
		}
	}
	ch := mustChain(t, Config{Sample: SampleConfig{On: true, Mode: SampleProportional, Percent: 30, Logs: true}})
	logs := benchLogs(t)
	dst := make([]byte, 0, len(logs))
	if out, _ := run(ch, fastpath.Logs, logs, dst); len(out) == 0 || len(out) == len(logs) {
		t.Fatalf("logs: %d bytes out of %d: the test says nothing", len(out), len(logs))
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := run(ch, fastpath.Logs, logs, dst); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("logs: %v allocations per request", n)
	}
}

// rewrittenSpans plans every entry of req and counts the spans given a new trace_state.
func rewrittenSpans(t *testing.T, c *Chain, req []byte) int {
	n := 0
	for off := 0; off < len(req); {
		f, err := next(req, off)
		if err != nil {
			t.Fatal(err)
		}
		off = f.end
		sp := spanPlan{dec: pool.GetBytes(64), scopes: pool.GetBytes(64), tracestates: pool.GetBytes(2048)}
		pn, err := c.sampler.planItems(&sp, fastpath.Traces, req[f.val:f.end])
		pool.PutBytes(sp.dec)
		pool.PutBytes(sp.scopes)
		pool.PutBytes(sp.tracestates)
		if err != nil {
			t.Fatal(err)
		}
		n += pn.rewritten
	}
	return n
}
