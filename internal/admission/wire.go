package admission

import (
	"github.com/otlpgate/otlpgate/fastpath"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// AdmitWire is AdmitTenant for a v1 request that arrived compressed in enc: plain is its
// decompressed body, already scanned, wire its bytes as received. When the admitter batches
// compressed requests as they arrived (pipeline.WireAdmitter: the pipeline, the spool's
// admission) it decides whether wire can travel as it is, for a tenant's request as for any
// other; any other admitter takes plain, counted in
// otlpgate_fastpath_passthrough_fallback_requests_total (reason spool). Either way a
// tenant's rate (-tenant.rate) is charged for plain, as AdmitTenant charges it, and given back
// when admission refuses. plain and wire are only read during the call. Safe for concurrent
// use.
func (c *Control) AdmitWire(o pipeline.Origin, sig fastpath.Signal, plain, wire []byte, enc pipeline.Encoding, items int) (*pipeline.Batch, Reason) {
	w, ok := c.p.(pipeline.WireAdmitter)
	if !ok || enc == pipeline.EncodingNone {
		b, r := c.AdmitTenant(o, sig, plain, items, fastpath.LayoutV1)
		if r == Accepted && enc != pipeline.EncodingNone {
			pipeline.CountFallback(pipeline.FallbackSpool, len(plain))
		}
		return b, r
	}
	t := o.Tenant
	if t != nil {
		if _, ok := t.Take(len(plain), items); !ok {
			return nil, Throttled
		}
	}
	b, err := w.AdmitWire(o, sig, plain, wire, enc, items)
	if err != nil {
		if t != nil {
			t.Refund(len(plain), items)
		}
		return nil, Of(err)
	}
	if c.refusingSince.Load() != 0 {
		c.refusingSince.Store(0)
	}
	return b, Accepted
}
