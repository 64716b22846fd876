package uds

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

var spansDropped = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_uds_spans_dropped_total",
	Help: "Spans of TRACE_EXPORT messages that could not be converted (bad ids or times); the other spans of the export are kept.",
})

var converterPool = sync.Pool{New: func() any { return new(spanConverter) }}

// exportSpans converts the JSON of a TRACE_EXPORT and hands the spans to the data path under one
// resource. It returns errJSON when the payload is not a JSON array of spans; then nothing of
// it was used. Runs on the connection's event loop.
func (c *conn) exportSpans(payload []byte, pid, tid uint64) error {
	conv := converterPool.Get().(*spanConverter)
	defer converterPool.Put(conv)
	if err := conv.convert(payload, tid); err != nil {
		return err
	}
	spansDropped.Add(float64(conv.dropped))
	if len(conv.spans) == 0 {
		return nil
	}
	res := c.resource(pid)
	buf := getBody(conv.requestSize(res, scope))
	defer putBody(buf)
	conv.writeRequest(*buf, res, scope)
	n := len(conv.spans)
	c.s.countConsume(fastpath.Traces, c.s.next.Consume(pipeline.Request{Signal: fastpath.Traces, Body: *buf, Items: n}), n)
	return nil
}
