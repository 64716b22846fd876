// Package pipeline owns admission, the open batches, seal and hand-out: the contracts the
// intakes admit through (Admitter, Consumer) and the one destinations take batches through
// (Destination), Prepare and its plan (Prepared), the open batch per signal, tenant, route and
// encoding (openset.go), the seal rules (size, items, age, gap) and the fan-out of a sealed
// Batch to every destination that takes it as a reference-counted payload, and the Batch's
// end through its owner (BatchOwner). A balanced destination splits a batch by key with
// Splitter (split.go), over fastpath's byte-level split.
//
// It imports fastpath (the wire), fastpath/tenant, pool/ and internal/statusmetrics (the
// metrics the status page reads) of otlpgate, never server/,
// client/, spool/, cmd/ or bench/; it does no I/O. Admission runs on the intakes' goroutines; a
// Pipeline starts one flusher goroutine (sealing by age, the drain rate, the idle sweep of
// tenants), which Close stops. Types that are shared say so on each method.
//
// # Admission
//
// The intakes admit through two contracts: Admitter (gRPC and OTLP/HTTP, which answer each
// request and, with -ack=upstream, wait for its batch) and Consumer (UDS and Kafka). Pipeline
// implements both. An intake fills one Request per request (request.go): its signal, origin
// (tenant and client address), body, layout and items, the bytes it arrived as when they were
// compressed, and the pooled buffer it offers; Admitter.Admit takes it whole and decides from
// it which way it goes. The UDS and Kafka intakes hand theirs to Consumer.Consume. Every
// admitter starts with Prepare, which runs one list of steps (prepareSteps: the signal, the
// tenant, the destinations that take them, compressed pass-through, -queue.max-bytes, the
// processing steps, the routes) and returns the request's plan (Prepared), which the admitter
// follows and with which it counts the outcome (otlpgate_fastpath_admitted_*,
// _refused_items_total, _stripped_*, _passthrough_*), so that a request is checked and counted
// alike wherever it goes.
//
// With a spool, the spool's admission (spool/feed) stands in front of the intakes instead of
// a Pipeline: it strips a request into a pooled buffer, appends it to the spool and answers
// once the append returned; the spool's feeders build batches with NewBatch and deliver them.
// Keeping one path from the spool to the destinations means no record is both in memory and
// on disk waiting for the same destination, and a replay after a restart travels the same way
// as a fresh record.
//
// # Compressed pass-through
//
// A request that arrived gzip- or zstd-compressed may join a batch as its received bytes
// (passthrough.go, Request.Wire) when nothing would rewrite it and every destination
// sends that encoding as it is (WireEncoder): the batch, its Encoding set, is the concatenation
// of the compressed requests, a stream every gzip or zstd decoder reads as the concatenated
// requests. The batch limits apply to its decompressed size (PlainLen), the queue's budget to
// the bytes it holds. Such batches have an open slot of their own per signal, encoding and
// tenant (openset.go), so a tenant's requests pass through too, never beside another tenant's;
// anything else falls back to the plain path, counted by reason.
//
// # Processing
//
// Config.Processor, when set, runs the byte-level steps of fastpath/process (resource attribute
// edits, drops by resource attribute, trace sampling) on every resource entry of a request
// inside admission, before the request joins a batch or the spool: every intake's requests
// pass through it. It writes into a pooled buffer that admission then copies from, what it
// takes past the request's size charged to the intake limiter's budget of the request's intake
// as it grows (Config.Budget, ConsumeBudget; budget.go), so that a step that writes more than it reads cannot take memory
// the limits do not know of; a request it leaves without entries is answered as admitted and
// admits nothing. The pipeline does not import fastpath/process: the Processor interface is
// the whole of the contract.
//
// # Tenants
//
// Config.Tenants, with -intake.headers, is the table of tenants (fastpath/tenant) the gRPC and
// HTTP intakes look their requests' header values up in. Admission keeps one open batch per
// signal and tenant (openset.go), so a batch never mixes tenants, and hands a sealed batch only
// to the destinations whose match-header takes its tenant (the routes, tenant.Routes, which
// SetDestinationsRoutes replaces with the set); the spool's admission keeps the tenant beside
// each request (Prepared.Tenant), and the spool's feeders read it back. An open batch pins its
// tenant (tenant.Tenant.Pin), so that the idle sweep, which the flusher runs as it ticks, does
// not take it out of the table.
//
// # Routes by resource attribute
//
// Config.Router, with a -dest's match=resource, groups a request's entries by the
// destinations that take each (process.Router implements it, beside its rules: Prepare hands
// it the request, and it fills Pieces, route.go): a request whose entries go one way is
// admitted as it came; a mixed one is copied, entry by entry and never below the Resource,
// into one piece per route, and each piece joins
// the open batch of its tenant and route (openset.go), which seal hands only to that route's
// destinations. The budget is charged for the whole request and the pieces join their batches
// under one lock: a request is admitted whole or not at all. With a spool the routed entries
// are one record, and each feeder keeps its destination's entries of it (Router.Filter).
//
// The router numbers the destinations by position in their set, so it goes with the set
// (routing.go): SetDestinationsRoutes swaps both, and a request split by one set's router
// that meets another set at enqueue is prepared again, so that its entries go by one set.
package pipeline
