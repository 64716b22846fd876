package admission

import "github.com/otlpgate/otlpgate/fastpath"

// AdmitWire admits a v1 request that arrived compressed in enc: plain is its decompressed
// body, already scanned, wire its bytes as received. When the admitter batches compressed
// requests as they arrived (fastpath.WireAdmitter, the pipeline) it decides whether wire can
// travel as it is; a request of a tenant (whose rate is taken here, as in AdmitTenant), or one
// for the spool's admission, is admitted plain and counted in
// otlpgate_fastpath_passthrough_fallback_requests_total. plain and wire are only read during
// the call. Safe for concurrent use.
func (c *Control) AdmitWire(t *fastpath.Tenant, sig fastpath.Signal, plain, wire []byte, enc fastpath.Encoding, items int) (*fastpath.Batch, Reason) {
	w, ok := c.p.(fastpath.WireAdmitter)
	if t != nil || !ok || enc == fastpath.EncodingNone {
		b, r := c.AdmitTenant(t, sig, plain, items, fastpath.LayoutV1)
		if r == Accepted && enc != fastpath.EncodingNone {
			why := fastpath.FallbackTenants
			if !ok {
				why = fastpath.FallbackSpool
			}
			fastpath.CountFallback(why, len(plain))
		}
		return b, r
	}
	b, err := w.AdmitWire(nil, sig, plain, wire, enc, items)
	if err != nil {
		return nil, Of(err)
	}
	if c.refusingSince.Load() != 0 {
		c.refusingSince.Store(0)
	}
	return b, Accepted
}
