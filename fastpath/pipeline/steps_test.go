package pipeline

import "testing"

// The tests of this package run the pipeline with the real processing steps and router of
// fastpath/process. That package imports this one (Processor's Tally), so no file of this
// package may import it: the external test package builds them (steps_ext_test.go) and hands
// them over through NewTestChain and NewTestRouter, set before any test runs.
var (
	// NewTestChain returns the process.Chain of spec.
	NewTestChain func(t testing.TB, spec ChainSpec) Processor
	// NewTestRouter returns the process.Router that routes destination i by rules[i] (""
	// takes the rest), each a match value.
	NewTestRouter func(t testing.TB, rules ...string) Router
)

// ChainSpec is the processing chain a test runs, as its flags would say it.
type ChainSpec struct {
	Set      [][2]string // -resource.set: key, value
	Drop     [][2]string // -drop: key, value
	FromPeer string      // -resource.from-peer: the attribute the client's address goes into
	Sample   bool        // -sample.traces=100, consistent, proportional
}

// testChain sets k8s.node.name to node-7 and drops the resources of namespace dev.
func testChain(t testing.TB) Processor {
	t.Helper()
	return NewTestChain(t, ChainSpec{Set: [][2]string{{"k8s.node.name", "node-7"}}, Drop: [][2]string{{"k8s.namespace.name", "dev"}}})
}

// newRouter routes destination i by rules[i] ("" takes the rest), each a match value.
func newRouter(t testing.TB, rules ...string) Router {
	t.Helper()
	return NewTestRouter(t, rules...)
}
