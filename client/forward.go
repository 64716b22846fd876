package client

import (
	"context"
	"sync"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Forwarded tenant headers (forward-headers): each batch carries its tenant
// (pipeline.Batch.Tenant), and a unary call or an HTTP POST sends the tenant's values of the
// destination's forward-headers with the batch. A unary call's metadata lives in its context:
// the destination keeps one context per tenant, made the first time the tenant's batch is sent
// and reused for every call after, so that a known tenant costs a map lookup and no
// allocation. The contexts are kept by tenant id, so that there are at most as many as ids in
// use (-intake.max-tenants, replays of a spool written with a larger bound aside): a tenant
// that left its table (-intake.tenant-idle) gives its id, and here its context, to a later
// one. Stream mode is refused by Validate: a stream's metadata is sent once,
// when it opens, and a stream carries every tenant's batches.

// tenantCtxs are a destination's call contexts by tenant id.
type tenantCtxs struct {
	mu sync.RWMutex
	m  map[uint32]tenantCtx
}

// tenantCtx is the call context of t.
type tenantCtx struct {
	t   *tenant.Tenant
	ctx context.Context
}

// callCtx returns the context a unary call of t's batch derives from: d.ctx, with t's values
// of the forward-headers appended to its outgoing metadata. Safe for concurrent use.
func (d *Dest) callCtx(t *tenant.Tenant) context.Context {
	if t == nil || len(d.cfg.ForwardHeaders) == 0 {
		return d.ctx
	}
	d.tctx.mu.RLock()
	c := d.tctx.m[t.ID()]
	d.tctx.mu.RUnlock()
	if c.t == t {
		return c.ctx
	}
	var kv []string
	for _, h := range d.cfg.ForwardHeaders {
		if v, _ := t.Value(h); v != "" {
			kv = append(kv, h, v)
		}
	}
	ctx := d.ctx
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(d.ctx, kv...)
	}
	d.tctx.mu.Lock()
	if d.tctx.m == nil {
		d.tctx.m = map[uint32]tenantCtx{}
	}
	d.tctx.m[t.ID()] = tenantCtx{t, ctx}
	d.tctx.mu.Unlock()
	return ctx
}

// setForwarded sets the forward-headers of req's header to t's values, removing those t has
// no value for (or all of them, for a batch without a tenant): the request is reused for
// every batch of its signal. fasthttp copies the values into buffers the request keeps.
func (d *Dest) setForwarded(h *fasthttp.RequestHeader, t *tenant.Tenant) {
	for _, name := range d.cfg.ForwardHeaders {
		v := ""
		if t != nil {
			v, _ = t.Value(name)
		}
		if v == "" {
			h.Del(name)
			continue
		}
		h.Set(name, v)
	}
}
