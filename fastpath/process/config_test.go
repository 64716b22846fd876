package process

import (
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

func TestParseSet(t *testing.T) {
	f := func(in string, want Attr, wantErr string) {
		t.Helper()
		a, err := ParseSet(in)
		switch {
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("ParseSet(%q): error %v, want one containing %q", in, err, wantErr)
		case wantErr == "" && (err != nil || a != want):
			t.Errorf("ParseSet(%q) = %+v, %v, want %+v", in, a, err, want)
		}
	}
	f("deployment.environment=prod", Attr{"deployment.environment", "prod"}, "")
	f("x=a=b", Attr{"x", "a=b"}, "")
	f("x=", Attr{"x", ""}, "")
	f("x=${env:A}", Attr{"x", "${env:A}"}, "") // expanded before, by cmd/otlpgate: what is left is literal
	f("novalue", Attr{}, "want key=value")
	f("=v", Attr{}, "want key=value")
}

func TestValidate(t *testing.T) {
	f := func(c Config, wantErr string) {
		t.Helper()
		err := c.Validate()
		if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%+v: %v, want %q", c, err, wantErr)
		}
	}
	f(Config{}, "")
	f(Config{Set: []Attr{{"a", "1"}, {"a", "2"}}}, "given twice")
	f(Config{Set: []Attr{{"a", "1"}}, Delete: []string{"a"}}, "also given to -resource.set")
	f(Config{Set: []Attr{{"a", "\xff"}}}, "not UTF-8")
	f(Config{Delete: []string{""}}, "empty attribute key")
	f(Config{Drop: []Match{{Key: "a", Value: "x"}}, Delete: []string{"a"}}, "all or nothing")
	f(Config{Drop: make([]Match, 65)}, "at most 64")
	f(Config{Sample: SampleConfig{On: true, Percent: 101}}, "from 0 to 100")
	f(Config{Sample: SampleConfig{On: true, Percent: -1}}, "from 0 to 100")
	f(Config{Sample: SampleConfig{On: true, Percent: 0}}, "")
	if c, err := New(Config{}); c != nil || err != nil {
		t.Errorf("New of an empty config: %v, %v", c, err)
	}
}

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float32{"10": 10, "15.3": 15.3, "0": 0, "100": 100, "33.333%": 33.333} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "x", "-1", "100.5", "NaN", "1e3"} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("ParsePercent(%q): no error", in)
		}
	}
}

// The hook passes fastpath's signal numbers as ints.
var _ pipeline.Processor = (*Chain)(nil)
