package fastpath_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// benchBatches are the Appendix B span batches, small (100 spans, 4 attributes) and large (500
// spans, 10 attributes), a string-heavy batch (stringHeavy), and the anchor benchmark's batch
// (otlpgen.Semconv: 1000 HTTP server spans of about 820 bytes, mostly short strings), as v1
// request bodies.
func benchBatches(b *testing.B) []fixture {
	return []fixture{
		{name: "small", sig: fastpath.Traces, v1: mustMarshal(b, otlpgen.New(1).Spans(otlpgen.Small))},
		{name: "large", sig: fastpath.Traces, v1: mustMarshal(b, otlpgen.New(1).Spans(otlpgen.Large))},
		{name: "strings", sig: fastpath.Traces, v1: mustMarshal(b, stringHeavy())},
		{name: "semconv", sig: fastpath.Traces, v1: mustMarshal(b, otlpgen.New(1).Spans(otlpgen.Semconv))},
	}
}

// BenchmarkScanSemconv is the full-depth scan of the anchor benchmark's batch alone, the one to
// profile: go test -run '^$' -bench ScanSemconv -cpuprofile cpu.pprof ./fastpath.
func BenchmarkScanSemconv(b *testing.B) {
	req := mustMarshal(b, otlpgen.New(1).Spans(otlpgen.Semconv))
	perCore(b, len(req), func() {
		if _, err := fastpath.ScanRequest(fastpath.Traces, req, fastpath.LayoutV1, fastpath.DepthFull); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkScanRequest scans each batch at each depth; "ref" runs the reference walker the
// generated walkers replaced (refwalk_test.go), for a before/after comparison in one run.
func BenchmarkScanRequest(b *testing.B) {
	scans := []struct {
		name string
		scan func(fastpath.Signal, []byte, fastpath.Layout, fastpath.Depth) (fastpath.Scan, error)
	}{{"", fastpath.ScanRequest}, {"/ref", fastpath.RefScanRequest}}
	for _, fx := range benchBatches(b) {
		for _, depth := range depths {
			for _, sc := range scans {
				if sc.name != "" && depth == fastpath.DepthTop {
					continue // the same code either way
				}
				b.Run(fx.name+"/"+depth.String()+sc.name, func(b *testing.B) {
					perCore(b, len(fx.v1), func() {
						if _, err := sc.scan(fx.sig, fx.v1, fastpath.LayoutV1, depth); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		}
	}
}

// BenchmarkScanFullPaired measures DepthFull on the generated walkers and on the reference
// walker in alternation, each turn timed on the thread's CPU clock, so that whatever else runs
// on a shared machine weighs on both alike. It reports GB/s per core of each and their ratio:
// the figures of the scan table in docs/benchmarks.md.
func BenchmarkScanFullPaired(b *testing.B) {
	for _, fx := range benchBatches(b) {
		b.Run(fx.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs() // no SetBytes: an op scans the batch with both walkers, reps times
			// Each turn scans about 200 KB, so that the system call reading the clock weighs
			// little against a small batch.
			reps := 1 + 200_000/len(fx.v1)
			var gen, ref time.Duration
			var err1, err2 error
			for b.Loop() {
				t0 := fastpath.ThreadCPU()
				for range reps {
					_, err1 = fastpath.ScanRequest(fx.sig, fx.v1, fastpath.LayoutV1, fastpath.DepthFull)
				}
				t1 := fastpath.ThreadCPU()
				for range reps {
					_, err2 = fastpath.RefScanRequest(fx.sig, fx.v1, fastpath.LayoutV1, fastpath.DepthFull)
				}
				t2 := fastpath.ThreadCPU()
				if err1 != nil || err2 != nil {
					b.Fatal(err1, err2)
				}
				gen, ref = gen+t1-t0, ref+t2-t1
			}
			if gen > 0 && ref > 0 {
				total := float64(len(fx.v1)) * float64(reps) * float64(b.N)
				b.ReportMetric(total/gen.Seconds()/1e9, "GB/s/core")
				b.ReportMetric(total/ref.Seconds()/1e9, "ref-GB/s/core")
				b.ReportMetric(ref.Seconds()/gen.Seconds(), "x")
			}
		})
	}
}

// perCore runs f in the benchmark loop on one locked thread and reports, beside the wall-clock
// MB/s, GB/s per core: bytes over the thread's CPU time, which time spent waiting for a core on
// a shared machine does not inflate.
func perCore(b *testing.B, size int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	start := fastpath.ThreadCPU()
	for b.Loop() {
		f()
	}
	if cpu := fastpath.ThreadCPU() - start; cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/cpu.Seconds()/1e9, "GB/s/core")
	}
}

func BenchmarkAppendOTEP(b *testing.B) {
	for _, fx := range benchBatches(b) {
		b.Run(fx.name, func(b *testing.B) {
			dst := make([]byte, 0, fastpath.OTEPSize(1<<40, fx.v1))
			b.SetBytes(int64(len(fx.v1)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = fastpath.AppendOTEP(dst[:0], 1<<40, fx.v1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendV1(b *testing.B) {
	for _, fx := range benchBatches(b) {
		b.Run(fx.name, func(b *testing.B) {
			otep, err := fastpath.AppendOTEP(nil, 1<<40, fx.v1)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 0, len(otep))
			b.SetBytes(int64(len(otep)))
			b.ReportAllocs()
			for b.Loop() {
				if dst, _, err = fastpath.AppendV1(dst[:0], otep); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendEntries is admission's copy into the batch: "clean" requests have nothing to
// strip (one copy), "odd" ones carry three odd top-level fields around their entries.
func BenchmarkAppendEntries(b *testing.B) {
	odd := []byte{0x12, 0x00, 0x28, 0x07, 0x3a, 0x03, 'a', 'b', 'c'}
	for _, fx := range benchBatches(b) {
		for _, variant := range []struct {
			name string
			req  []byte
		}{{"clean", fx.v1}, {"odd", append(append(append([]byte{}, odd...), fx.v1...), odd...)}} {
			b.Run(fx.name+"/"+variant.name, func(b *testing.B) {
				dst := make([]byte, 0, len(variant.req))
				b.SetBytes(int64(len(variant.req)))
				b.ReportAllocs()
				var err error
				for b.Loop() {
					if dst, _, _, err = fastpath.AppendEntries(dst[:0], variant.req, fastpath.LayoutV1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkUnmarshalVT decodes the same bytes, for comparison with ScanRequest: "new" into a
// fresh message each time, "pool" into a message from the vtprotobuf pool, whose slices are
// reused.
func BenchmarkUnmarshalVT(b *testing.B) {
	for _, fx := range benchBatches(b) {
		b.Run(fx.name+"/new", func(b *testing.B) {
			b.SetBytes(int64(len(fx.v1)))
			b.ReportAllocs()
			for b.Loop() {
				var m coltracev1.ExportTraceServiceRequest
				if err := m.UnmarshalVT(fx.v1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fx.name+"/pool", func(b *testing.B) {
			b.SetBytes(int64(len(fx.v1)))
			b.ReportAllocs()
			for b.Loop() {
				m := coltracev1.ExportTraceServiceRequestFromVTPool()
				if err := m.UnmarshalVT(fx.v1); err != nil {
					b.Fatal(err)
				}
				m.ReturnToVTPool()
			}
		})
	}
}
