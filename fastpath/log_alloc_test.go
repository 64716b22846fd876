//go:build !race

package fastpath

import "testing"

type nopLog struct{}

func (nopLog) Append(Signal, *Tenant, int, []byte) error { return nil }

// Admission with a log allocates nothing: the stripped copy lives in a pooled buffer.
func TestLoggedAdmitZeroAlloc(t *testing.T) {
	p, err := NewLogged(testConfig(), nopLog{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	v1 := entry(3000, 1)
	otep, _ := AppendOTEP(nil, 7, v1)
	for range 100 {
		p.Consume(Traces, v1, 1)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(Traces, v1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Admit(Traces, otep, 1, LayoutOTEP); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("logged admission: %v allocations per run, want 0", allocs)
	}
}

func BenchmarkLoggedAdmit(b *testing.B) {
	p, err := NewLogged(testConfig(), nopLog{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	v1 := entry(3000, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(v1)))
	for b.Loop() {
		p.Consume(Traces, v1, 1)
	}
}
