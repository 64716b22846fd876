package kafkaconsume

import "testing"

// BenchmarkHandle is the consumer's own cost per record: check (otlp_proto: scan at full
// depth; otlp_json: transcode), admit into a durable admitter, track the offset. 100 spans of
// 4 attributes a record.
func BenchmarkHandle(b *testing.B) {
	for _, json := range []bool{false, true} {
		name := "otlp_proto"
		if json {
			name = "otlp_json"
		}
		b.Run(name, func(b *testing.B) {
			c, p := handler(b, &durable{}, json)
			proto, js := spansRecord(b, 100)
			v := proto
			if json {
				v = js
			}
			rs := recordsOf(v, 1)
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				rs[0].Offset = int64(i)
				c.handle(p, rs[0])
			}
		})
	}
}
