//go:build !race

package feed

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
	"github.com/otlpgate/otlpgate/spool"
)

// allocSpool is a spool whose appends allocate nothing in steady state: large segments (no
// rotation) and no sync.
func allocSpool(tb testing.TB) *spool.Spool {
	tb.Helper()
	c := spool.DefaultConfig()
	c.Dir, c.Sync = "/spool", spool.SyncNone
	c.SegmentBytes, c.MaxBytes = 64<<20, 1<<30
	c.Encoded = true
	s, err := spool.Open(c, spool.NewCrashFS(), []string{"d"})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Admission into the spool allocates nothing: the stripped copy lives in a pooled buffer.
func TestAdmissionZeroAlloc(t *testing.T) {
	s := allocSpool(t)
	defer s.Close()
	a := newAdmission(t, admissionConfig(), s)
	v1 := entry(3000, 1)
	otep, _ := fastpath.AppendOTEP(nil, 7, v1)
	for range 100 {
		a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 1})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Admit(pipeline.Request{Signal: fastpath.Traces, Body: otep, Items: 1, Layout: fastpath.LayoutOTEP}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admission into the spool: %v allocations per run, want 0", allocs)
	}
}

// Requests kept compressed as they arrived are spooled without an allocation too, gzip and
// zstd (whose record gets the preamble in a pooled buffer).
func TestAdmissionWireZeroAlloc(t *testing.T) {
	s := allocSpool(t)
	defer s.Close()
	a := newAdmission(t, admissionConfig(), s)
	a.SetDestinations([]pipeline.Destination{wireDest{newDest(), pipeline.EncodingGzip}})
	z := newAdmission(t, admissionConfig(), s)
	z.SetDestinations([]pipeline.Destination{wireDest{newDest(), pipeline.EncodingZstd}})
	v1 := entry(3000, 1)
	gz, zs := ziptest.Gzip(t, v1), ziptest.Zstd(t, nil, v1)
	passed := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	turn := func() {
		if _, err := a.Admit(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 1, Wire: gz, Encoding: pipeline.EncodingGzip}); err != nil {
			t.Fatal(err)
		}
		if _, err := z.Admit(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 1, Wire: zs, Encoding: pipeline.EncodingZstd}); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		turn()
	}
	if allocs := testing.AllocsPerRun(1000, turn); allocs != 0 {
		t.Fatalf("compressed admission into the spool: %v allocations per run, want 0", allocs)
	}
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - passed; n != 2*1101 {
		t.Fatalf("%v requests kept compressed, want %d", n, 2*1101)
	}
}

// BenchmarkAdmission appends to a spool on disk (no sync) that drops its oldest segments to
// stay within 64 MiB, however long the benchmark runs: a plain request, and the same request as
// it arrived gzip- and zstd-compressed, spooled as received. Bytes per second are the request's
// plain bytes in each case.
func BenchmarkAdmission(b *testing.B) {
	v1 := entry(3000, 1)
	for _, enc := range []pipeline.Encoding{pipeline.EncodingNone, pipeline.EncodingGzip, pipeline.EncodingZstd} {
		b.Run(enc.String(), func(b *testing.B) {
			c := spool.DefaultConfig()
			c.Dir, c.Sync, c.Full = b.TempDir(), spool.SyncNone, spool.FullDropOldest
			c.SegmentBytes, c.MaxBytes, c.Encoded = 8<<20, 64<<20, true
			s, err := spool.Open(c, spool.OSFS{}, []string{"d"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			a, err := NewAdmission(admissionConfig(), s)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			a.SetDestinations([]pipeline.Destination{wireDest{newDest(), enc}})
			var wire []byte
			switch enc {
			case pipeline.EncodingGzip:
				wire = ziptest.Gzip(b, v1)
			case pipeline.EncodingZstd:
				wire = ziptest.Zstd(b, nil, v1)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(v1)))
			for b.Loop() {
				if enc == pipeline.EncodingNone {
					err = a.Consume(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 1})
				} else {
					_, err = a.Admit(pipeline.Request{Signal: fastpath.Traces, Body: v1, Items: 1, Wire: wire, Encoding: enc})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
