//go:build !race

package feed

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/spool"
)

// allocSpool is a spool whose appends allocate nothing in steady state: large segments (no
// rotation) and no sync.
func allocSpool(tb testing.TB) *spool.Spool {
	tb.Helper()
	c := spool.DefaultConfig()
	c.Dir, c.Sync = "/spool", spool.SyncNone
	c.SegmentBytes, c.MaxBytes = 64<<20, 1<<30
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
		a.Consume(fastpath.Traces, v1, 1)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := a.Consume(fastpath.Traces, v1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Admit(fastpath.Traces, otep, 1, fastpath.LayoutOTEP); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("admission into the spool: %v allocations per run, want 0", allocs)
	}
}

// BenchmarkAdmission appends to a spool on disk (no sync) that drops its oldest segments to
// stay within 64 MiB, however long the benchmark runs.
func BenchmarkAdmission(b *testing.B) {
	c := spool.DefaultConfig()
	c.Dir, c.Sync, c.Full = b.TempDir(), spool.SyncNone, spool.FullDropOldest
	c.SegmentBytes, c.MaxBytes = 8<<20, 64<<20
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
	v1 := entry(3000, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(v1)))
	for b.Loop() {
		if err := a.Consume(fastpath.Traces, v1, 1); err != nil {
			b.Fatal(err)
		}
	}
}
