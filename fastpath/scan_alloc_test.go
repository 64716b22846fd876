//go:build !race

package fastpath_test

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// TestScanConvertAllocs proves that scanning and converting allocate nothing: at every depth, in
// both layouts, on success and on rejection, and for the conversions into a buffer of the size
// the API tells.
func TestScanConvertAllocs(t *testing.T) {
	const runs = 50
	check := func(t *testing.T, what string, f func()) {
		t.Helper()
		if n := testing.AllocsPerRun(runs, f); n != 0 {
			t.Fatalf("%s: %v allocations per run, want 0", what, n)
		}
	}
	inputs := append(fixtures(t), refFixtures(t)...)
	inputs = append(inputs,
		fixture{name: "garbage", sig: fastpath.Traces, v1: []byte("GET / HTTP/1.1\r\n")},
		fixture{name: "too-deep", sig: fastpath.Logs, v1: logBody(fastpath.MaxNesting, nil)},
		fixture{name: "string-heavy", sig: fastpath.Traces, v1: mustMarshal(t, stringHeavy())},
		fixture{name: "not-utf8", sig: fastpath.Traces, v1: utf8Request("long enough to be checked in halves: Grüße, 日本語 \xff and more text")},
	)
	var sink fastpath.Scan
	for _, fx := range inputs {
		t.Run(fx.name, func(t *testing.T) {
			otep, err := fastpath.AppendOTEP(nil, 1<<40, fx.v1)
			if err != nil {
				otep = fx.v1 // the malformed inputs: scan them as OTEP too
			}
			for _, depth := range depths {
				check(t, "ScanRequest v1 "+depth.String(), func() {
					sink, _ = fastpath.ScanRequest(fx.sig, fx.v1, fastpath.LayoutV1, depth)
				})
				check(t, "ScanRequest otep "+depth.String(), func() {
					sink, _ = fastpath.ScanRequest(fx.sig, otep, fastpath.LayoutOTEP, depth)
				})
			}
			toOTEP := make([]byte, 0, fastpath.OTEPSize(1<<40, fx.v1))
			check(t, "AppendOTEP", func() {
				toOTEP, _ = fastpath.AppendOTEP(toOTEP[:0], 1<<40, fx.v1)
			})
			size := 0
			check(t, "OTEPSize", func() {
				size = fastpath.OTEPSize(1<<40, fx.v1)
			})
			toV1 := make([]byte, 0, len(otep))
			check(t, "AppendEntries v1", func() {
				toV1, _, _, _ = fastpath.AppendEntries(toV1[:0], fx.v1, fastpath.LayoutV1)
			})
			check(t, "AppendEntries otep", func() {
				toV1, _, _, _ = fastpath.AppendEntries(toV1[:0], otep, fastpath.LayoutOTEP)
			})
			check(t, "AppendV1", func() {
				toV1, _, _ = fastpath.AppendV1(toV1[:0], otep)
			})
			if size < len(fx.v1) {
				t.Fatalf("OTEPSize %d below the body's %d bytes", size, len(fx.v1))
			}
		})
	}
	_ = sink
}
