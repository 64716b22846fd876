package kafkadest

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// tenantHeaders is the record headers of one tenant: its values of the forward-headers, empty
// ones left out.
type tenantHeaders struct {
	t  *tenant.Tenant
	hs []kgo.RecordHeader
}

// headersOf returns the record headers every record of a batch of t carries, nil for none.
// They are made once per tenant and shared by the records of all its batches, which nobody
// writes to (kgo only reads them): no allocation per batch once a tenant was seen. The map is
// bounded by the tenant table (-intake.max-tenants); an id the table gave a new tenant after
// sweeping the old one is made again. Safe for concurrent use.
func (d *Dest) headersOf(t *tenant.Tenant) []kgo.RecordHeader {
	if t == nil || len(d.cfg.ForwardHeaders) == 0 {
		return nil
	}
	d.tenants.RLock()
	c := d.tenants.m[t.ID()]
	d.tenants.RUnlock()
	if c.t == t {
		return c.hs
	}
	var hs []kgo.RecordHeader
	for _, h := range d.cfg.ForwardHeaders {
		if v, _ := t.Value(h); v != "" {
			hs = append(hs, kgo.RecordHeader{Key: h, Value: []byte(v)})
		}
	}
	hs = hs[:len(hs):len(hs)]
	d.tenants.Lock()
	if d.tenants.m == nil {
		d.tenants.m = map[uint32]tenantHeaders{}
	}
	d.tenants.m[t.ID()] = tenantHeaders{t, hs}
	d.tenants.Unlock()
	return hs
}
