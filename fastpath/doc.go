// Package fastpath owns the core of the data path: scanning and re-tagging raw OTLP bytes,
// admission into byte-bounded queues, batching by concatenation, and fan-out of sealed batches to
// the destinations as reference-counted payloads.
//
// It does no I/O and must not import server/, client/, cmd/ or bench/. Its functions run on the
// caller's goroutine; types that are shared say so on each method.
//
// # Raw scanning
//
// TopLevel is the one walker of a request's top level: ScanRequest, the conversions, admission,
// and the client's framing and the gRPC intake's partial admission all walk with it, so that
// they agree on what a well-formed top level is. ScanRequest checks an Export request without
// decoding it, to the depth the intake chooses, and counts its resource entries and items;
// AppendOTEP and AppendV1 move a request between the v1 layout (entries at field 1) and the
// OTEP layout (id at field 1, entries at field 2) by rewriting top-level tags. AppendEntries is
// how a request joins a batch: only its resource entries are copied, every other top-level
// field is stripped (and counted by the pipeline in otlpgate_fastpath_stripped_fields_total),
// so that no batch holds a field an upstream would refuse the whole batch for. None of them allocates or keeps a reference to its input, and all
// are safe for concurrent use. They return pre-made errors (ErrTruncated, ErrWireType, ...) and
// count nothing themselves: the intake that calls them knows the protocol and counts the
// rejection under its own label.
//
// # Admission
//
// The intakes admit through two contracts: Admitter (gRPC and OTLP/HTTP, which answer each
// request and, with -ack=upstream, wait for its batch) and Consumer (UDS and Kafka). Pipeline
// implements both. Every admitter starts with Prepare, which checks a request against
// -queue.max-bytes, runs the processing steps and counts the outcome
// (otlpgate_fastpath_admitted_*, _refused_items_total, _stripped_*), so that a request is
// checked and counted alike wherever it goes.
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
// (passthrough.go, Pipeline.AdmitWire) when nothing would rewrite it and every destination
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
// as it grows (Config.Budget,
// ConsumeBudget; budget.go), so that a step that writes more than it reads cannot take memory
// the limits do not know of; a request it leaves without entries is answered as admitted and
// admits nothing. fastpath does not
// import fastpath/process: the Processor interface is the whole of the contract.
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
// Config.Router, with a -dest's match=resource, says which destinations take each resource
// entry (process.Router implements it). Prepare groups a request's entries by route
// (route.go): a request whose entries go one way is admitted as it came; a mixed one is copied,
// entry by entry and never below the Resource, into one piece per route, and each piece joins
// the open batch of its tenant and route (openset.go), which seal hands only to that route's
// destinations. The budget is charged for the whole request and the pieces join their batches
// under one lock: a request is admitted whole or not at all. With a spool the routed entries
// are one record, and each feeder keeps its destination's entries of it (FilterRoute).
//
// # OTLP/JSON
//
// JSONTranscoder turns an OTLP/JSON Export request into the v1 protobuf bytes the rest of the
// path carries, in one pass over the body's bytes as a stream of tokens (jsonlex.go), driven by
// the JSON column of the schema (jsonschema.go): no tree of the body is built, and besides its
// output a call holds state that follows the nesting depth (jsonlen.go). It allocates nothing
// when reused and is owned by one goroutine at a time. The tree-based transcoder it replaced
// is kept in jsontree_test.go as the reference of FuzzJSONStreamEquivalence.
//
// The wire schema the scanner checks is a table in schema.go, transcribed from the .proto files
// under proto/ and tested against their compiled descriptors. Below the top level, ScanRequest
// runs walkers generated from that table (walk_gen.go, by the program fastpath/internal/walkgen,
// which reads the table from source: go generate ./fastpath), one per message and depth; the walker that interprets the table at run time is
// kept in refwalk_test.go as their reference, and FuzzScanEquivalence holds the two to the same
// counts and errors.
package fastpath
