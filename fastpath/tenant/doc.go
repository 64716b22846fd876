// Package tenant owns the tenant table (-intake.headers): the tuples of tenant header values
// the intakes read, interned once as a *Tenant that a lookup finds without a lock or an
// allocation (tenant.go, tenantindex.go); the bound on the table and on each client address's
// share of it (tenantpeer.go); tenants bound to bearer tokens (tenantcreds.go); the idle sweep
// that frees the place of a tenant without traffic and without an open batch (tenantidle.go);
// each tenant's token bucket for -tenant.rate (tenantrate.go); its counters, read at scrape
// time (tenantmetrics.go); and the destinations' match-headers, Match and Routes, that say
// which destinations take a tenant.
//
// fastpath's pipeline keeps an open batch per tenant and pins the tenant while it is open; the
// spool records a tenant beside each request (Tenant.Record) and reads it back (FromRecord).
//
// It imports no package of otlpgate. It starts no goroutines: lookups run on the intakes'
// goroutines, the sweep on the caller's (a lookup that finds the table due, or the pipeline's
// flusher); a Table and its tenants are safe for concurrent use.
package tenant
