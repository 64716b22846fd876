//go:build !race

package kafkaconsume

import "testing"

// Reading a record, checking it, admitting it and tracking its offset allocates nothing in the
// consumer's code, for otlp_proto and, once its buffer grew, otlp_json records. (What kgo
// allocates to fetch records, and the pipeline per batch, is not counted here: see
// BenchmarkConsume for the whole path.)
func TestHandleAllocs(t *testing.T) {
	for _, json := range []bool{false, true} {
		in := &durable{}
		c, p := handler(t, in, json)
		proto, js := spansRecord(t, 100)
		v := proto
		if json {
			v = js
		}
		rs := recordsOf(v, 1000)
		i := 0
		c.handle(p, rs[i])
		i++
		if n := testing.AllocsPerRun(500, func() {
			c.handle(p, rs[i])
			i++
		}); n != 0 {
			t.Errorf("json=%v: %v allocations per record", json, n)
		}
		if in.n != i || p.acked != int64(i) {
			t.Fatalf("json=%v: %d records admitted, acked up to %d; want %d", json, in.n, p.acked, i)
		}
	}
}
