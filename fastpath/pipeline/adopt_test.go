package pipeline

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// owned is req in a pooled buffer of its own, as an intake holds it.
func owned(req []byte) *[]byte {
	b := pool.GetBytes(len(req))
	*b = append((*b)[:0], req...)
	return b
}

// poison overwrites all of b's capacity, as the buffer's next user would.
func poison(b *[]byte) {
	all := (*b)[:cap(*b)]
	for i := range all {
		all[i] = 0xdb
	}
}

// A request that opens a batch alone, in v1 form with nothing to strip, becomes the batch
// without a copy; the intake is left a buffer that shares no byte with the batch, so whatever
// it writes there afterwards (here: poison over all of it) cannot reach the destination, which
// gets the exact request. Every other request is copied, and the intake's buffer left as it
// was, so poisoning it after admission cannot reach the destination either.
func TestAdmitOwned(t *testing.T) {
	big := entry(60<<10, 'a')
	odd := []byte{0x28, 0x07} // field 5, varint: stripped on the way into the batch
	for _, tc := range []struct {
		name    string
		before  []byte // admitted first, opening the batch, when set
		req     []byte
		adopted bool
		want    []byte
	}{
		{"alone", nil, big, true, big},
		{"stripped", nil, append(append([]byte{}, odd...), big...), false, big},
		{"joins an open batch", entry(10, 'b'), big, false, append(entry(10, 'b'), big...)},
		{"small", nil, entry(100, 'c'), false, entry(100, 'c')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{ok: true}
			p := newTestPipeline(t, testConfig(), rec)
			if tc.before != nil {
				if err := p.Consume(Request{Signal: fastpath.Traces, Body: tc.before, Items: 1}); err != nil {
					t.Fatal(err)
				}
			}
			own := owned(tc.req)
			orig := *own
			adopted := testutil.ToFloat64(adoptedBytes)
			if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: *own, Items: 1, Own: own}); err != nil {
				t.Fatal(err)
			}
			got := testutil.ToFloat64(adoptedBytes) - adopted
			switch {
			case tc.adopted && got != float64(len(tc.req)):
				t.Fatalf("adopted %v bytes, want the request's %d", got, len(tc.req))
			case !tc.adopted && got != 0:
				t.Fatalf("adopted %v bytes, want a copy", got)
			case tc.adopted && (len(*own) != 0 || &(*own)[:1][0] == &orig[0]):
				t.Fatalf("the intake kept the adopted buffer (len %d)", len(*own))
			case !tc.adopted && !bytes.Equal(*own, tc.req):
				t.Fatal("a copied request's buffer changed")
			}
			poison(own)
			pool.PutBytes(own)
			// A request of the same size in a buffer from the pool (maybe the one just
			// returned), for another signal: it must not write into the traces batch.
			other := owned(bytes.Repeat([]byte{0xee}, len(tc.req)))
			poison(other)
			pool.PutBytes(other)
			p.Flush()
			bs := rec.batches()
			if len(bs) != 1 || !bytes.Equal(bs[0].body, tc.want) {
				t.Fatalf("destination got %d batches, want one of the exact request", len(bs))
			}
		})
	}
}

// A batch that adopted its first request's buffer grows like any other when more join it: the
// destination gets both requests, in order.
func TestAdoptedBatchGrows(t *testing.T) {
	rec := &recorder{ok: true}
	p := newTestPipeline(t, testConfig(), rec)
	first, second := entry(60<<10, 'a'), entry(60<<10, 'b')
	for _, req := range [][]byte{first, second} {
		own := owned(req)
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: *own, Items: 1, Own: own}); err != nil {
			t.Fatal(err)
		}
		poison(own)
		pool.PutBytes(own)
	}
	p.Flush()
	bs := rec.batches()
	if want := append(append([]byte{}, first...), second...); len(bs) != 1 || !bytes.Equal(bs[0].body, want) {
		t.Fatalf("destination got %d batches, want one of both requests", len(bs))
	}
}
