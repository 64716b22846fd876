package client

import (
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// signals= selects what a destination takes: a list past the comma that separates items,
// combinable with match-header, refused when empty or naming an unknown signal.
func TestParseDestSignals(t *testing.T) {
	f := func(spec string, want fastpath.SignalSet) {
		t.Helper()
		c, err := ParseDest(spec, DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if c.Signals != want {
			t.Errorf("%s: signals %v, want %v", spec, c.Signals, want)
		}
	}
	f("name=a,endpoint=h:1", 0)
	f("name=a,endpoint=h:1,signals=traces", 1<<fastpath.Traces)
	f("name=a,signals=traces,logs,endpoint=h:1", 1<<fastpath.Traces|1<<fastpath.Logs)
	f("name=a,endpoint=h:1,signals=metrics|logs", 1<<fastpath.Metrics|1<<fastpath.Logs)
	f("name=a,endpoint=h:1,signals=traces,metrics,logs,match-header=x-tenant:acme", fastpath.AllSignals)
	c, err := ParseDest("name=a,endpoint=h:1,signals=logs,match-header=x-tenant:acme", DefaultConfig())
	if err != nil || c.MatchHeader.Header != "x-tenant" || c.Signals != 1<<fastpath.Logs {
		t.Errorf("signals with match-header: %+v, %v", c, err)
	}
	for spec, want := range map[string]string{
		"name=a,endpoint=h:1,signals=":                    "no signal",
		"name=a,endpoint=h:1,signals=spans":               `unknown signal "spans"`,
		"name=a,endpoint=h:1,signals=traces,events":       `unknown signal "events"`,
		"name=a,endpoint=h:1,signals=traces,signals=logs": `key "signals" given twice`,
	} {
		if _, err := ParseDest(spec, DefaultConfig()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", spec, err, want)
		}
	}
}
