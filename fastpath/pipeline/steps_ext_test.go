package pipeline_test

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
)

// The real steps and router for the tests of the pipeline's own package (steps_test.go).
func init() {
	pipeline.NewTestChain = func(t testing.TB, spec pipeline.ChainSpec) pipeline.Processor {
		t.Helper()
		var c process.Config
		for _, kv := range spec.Set {
			c.Set = append(c.Set, process.Attr{Key: kv[0], Value: kv[1]})
		}
		for _, kv := range spec.Drop {
			c.Drop = append(c.Drop, process.Match{Key: kv[0], Value: kv[1]})
		}
		c.FromPeer = spec.FromPeer
		if spec.Sample {
			c.Sample = process.SampleConfig{On: true, Mode: process.SampleProportional, Percent: 100}
		}
		chain, err := process.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return chain
	}
	pipeline.NewTestRouter = func(t testing.TB, rules ...string) pipeline.Router {
		t.Helper()
		var rs [][]process.Match
		for _, r := range rules {
			if r == "" {
				rs = append(rs, nil)
				continue
			}
			m, err := process.ParseRoute(r)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, m)
		}
		rt, err := process.NewRouter(rs)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
}
