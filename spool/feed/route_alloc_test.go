//go:build !race

package feed

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
)

// Admission into the spool with routes allocates nothing either: the split of a mixed
// request is one pooled buffer, appended as one record.
func TestAdmissionRoutesZeroAlloc(t *testing.T) {
	s := allocSpool(t)
	defer s.Close()
	co, err := process.ParseRoute("resource:service.name=checkout")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := process.NewRouter([][]process.Match{co, nil})
	if err != nil {
		t.Fatal(err)
	}
	cfg := admissionConfig()
	cfg.Router = rt
	a := newAdmission(t, cfg, s)
	req := logsOf(t, "cart", "checkout", "search", "checkout")
	for range 100 {
		a.Consume(pipeline.Request{Signal: fastpath.Logs, Body: req, Items: 4})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := a.Consume(pipeline.Request{Signal: fastpath.Logs, Body: req, Items: 4}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("routed admission into the spool: %v allocations per run, want 0", allocs)
	}
}
