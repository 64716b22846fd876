package admission

import (
	"github.com/otlpgate/otlpgate/fastpath"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// AdmitOwned is AdmitTenant for a v1 request that is all of *own, a pooled buffer the caller
// holds, which the admitter may take over instead of copying the request (pipeline.Adopter);
// an admitter without that takes the bytes as AdmitTenant does. The caller must not read the
// request's bytes after the call, and returns *own to the pool as it would have. Safe for
// concurrent use.
func (c *Control) AdmitOwned(o pipeline.Origin, sig fastpath.Signal, own *[]byte, items int) (*pipeline.Batch, Reason) {
	a, ok := c.p.(pipeline.Adopter)
	if !ok {
		return c.AdmitTenant(o, sig, *own, items, fastpath.LayoutV1)
	}
	t := o.Tenant
	n := len(*own) // *own may be exchanged by the call
	if t != nil {
		if _, ok := t.Take(n, items); !ok {
			return nil, Throttled
		}
	}
	b, err := a.AdmitOwned(o, sig, own, items)
	if err != nil {
		if t != nil {
			t.Refund(n, items)
		}
		return nil, Of(err)
	}
	if c.refusingSince.Load() != 0 {
		c.refusingSince.Store(0)
	}
	return b, Accepted
}
