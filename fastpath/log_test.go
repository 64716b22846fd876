package fastpath

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// memLog is a Log that keeps copies of what is appended, or fails with err.
type memLog struct {
	mu    sync.Mutex
	recs  [][]byte
	sigs  []Signal
	items []int
	tens  []*Tenant
	err   error
}

func (l *memLog) Append(sig Signal, t *Tenant, items int, payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.recs = append(l.recs, bytes.Clone(payload))
	l.sigs = append(l.sigs, sig)
	l.items = append(l.items, items)
	l.tens = append(l.tens, t)
	return nil
}

// A logged pipeline appends each request as the batch would carry it: the v1 resource entries
// only, an OTEP request re-tagged, odd top-level fields stripped; with its signal and items.
func TestLoggedAppendsStrippedRequests(t *testing.T) {
	l := &memLog{}
	p, err := NewLogged(testConfig(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	v1 := entry(10, 'a')
	otep, _ := AppendOTEP(nil, 7, entry(5, 'b'))
	odd := append([]byte{0x28, 0x07}, entry(3, 'c')...) // field 5, then an entry
	if err := p.Consume(Traces, v1, 2); err != nil {
		t.Fatal(err)
	}
	if b, err := p.Admit(Logs, otep, 3, LayoutOTEP); err != nil || b != nil {
		t.Fatalf("%v %v", b, err)
	}
	if err := p.Consume(Metrics, odd, 4); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{v1, entry(5, 'b'), entry(3, 'c')}
	wantSig := []Signal{Traces, Logs, Metrics}
	if len(l.recs) != 3 {
		t.Fatalf("%d records, want 3", len(l.recs))
	}
	for i := range want {
		if !bytes.Equal(l.recs[i], want[i]) || l.sigs[i] != wantSig[i] || l.items[i] != i+2 {
			t.Errorf("record %d: %x %v %d, want %x %v %d", i, l.recs[i], l.sigs[i], l.items[i], want[i], wantSig[i], i+2)
		}
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Errorf("a logged pipeline holds %d bytes", q)
	}
}

// The log's refusals reach the intakes as ErrFull (backpressure), each counted under its reason.
func TestLoggedRefusals(t *testing.T) {
	l := &memLog{}
	p, err := NewLogged(testConfig(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		err    error
		reason string
	}{{ErrLogFull, "spool_full"}, {ErrLogIO, "spool_io"}} {
		l.err = c.err
		ctr := refusedItems.WithLabelValues("traces", c.reason)
		before := testutil.ToFloat64(ctr)
		err := p.Consume(Traces, entry(10, 'a'), 5)
		if !errors.Is(err, ErrFull) || !errors.Is(err, c.err) {
			t.Errorf("%v: got %v", c.err, err)
		}
		if d := testutil.ToFloat64(ctr) - before; d != 5 {
			t.Errorf("%s: counted %v items, want 5", c.reason, d)
		}
	}
	p.Close()
	if err := p.Consume(Traces, entry(1, 'a'), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	cfg := testConfig()
	cfg.Ack = AckUpstream
	if _, err := NewLogged(cfg, l); err == nil {
		t.Error("ack=upstream accepted with a log")
	}
}
