// Package feed delivers the spool to the destinations: one Feeder per destination reads that
// destination's spool.Reader, oldest record first, builds batches from consecutive records of
// one signal and hands them to the destination (a client.Dest, a client.Fleet or the file);
// Admission admits requests into the spool, in front of the intakes (it implements
// pipeline.Admitter and pipeline.Consumer, as a pipeline.Pipeline does without a spool).
//
// # Why admission does not hand batches to the destinations itself
//
// With a spool, the spool is the queue. Admission appends each request (stripped, as a batch
// would carry it) and answers once the append returned; it keeps nothing. Every destination is
// fed from the spool alone, by its Feeder, so there is one path from acknowledgement to
// delivery, whether the record was appended a microsecond ago or before a restart, and nothing
// has to decide which records are already in flight. The cost is one read per record per
// destination, served by the page cache while the destinations keep up.
//
// # Routes
//
// With routes by resource attribute (Config.Router, a -dest's match=resource) admission
// spools the entries some destination takes as one record, so that a request is spooled whole
// or not at all however its entries are routed; each Feeder keeps, of every record, the
// entries its destination takes (pipeline.Router.Filter, in place in the batch's buffer) and
// finishes a record of which it takes none unread. A reload of the destinations gives the
// admission the new router (SetDestinationsRouter, which returns once every request split by
// the old one is spooled) and each feeder its new Route from Spool.Written on: a record goes
// by the router that split it, at the position its destination had in that set.
//
// # Memory
//
// A Feeder hands over batches while the bytes it handed over and the destination has not
// finished stay below Config.MaxBytes (its share of -queue.max-bytes); past it the records
// stay on disk until a batch finishes. What a feeder holds is therefore its share plus one
// batch being built, whatever the spool holds. Batches are pooled payloads filled straight by
// spool.Reader.Next.
//
// # Finishing records
//
// A batch carries the positions of its records. When its destination delivered it, each is
// Finished; when its upstream refused it for good (pipeline.Batch.Reject), each is Dropped as
// rejected; when the destination gave it up for a reason of its own (too large, poison, or
// unanswered with retry-on-reconnect=false; counted by the destination), each is Dropped as
// undeliverable; both are counted by the spool. An upstream that does not answer costs
// nothing: the destination sends the request again after its ack timeout, as often as it takes.
// Retry budgets do not apply: with a spool, cmd runs the destinations without RetryMaxElapsed,
// so a destination that cannot reach its upstream keeps retrying while the spool fills, and
// -spool.full decides (and counts) what happens then. Once Stop was called, a batch given up (a destination
// shutting down drops what it holds) leaves its records unfinished: the next start reads them
// again (at least once; the spool counts them as replayed).
//
// # Goroutines
//
// Start runs one goroutine per Feeder; Stop ends it. BatchDone runs on the destination's
// goroutines. Admission runs on the intakes' goroutines and starts none. It imports fastpath/, spool/ and pool/, never client/, server/ or cmd/.
package feed
