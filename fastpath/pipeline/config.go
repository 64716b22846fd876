package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// AckMode says when an intake may acknowledge a request.
type AckMode uint8

const (
	// AckAccept acknowledges once the request is admitted: its bytes are in an open batch or a
	// destination queue, counted against Config.QueueMaxBytes.
	AckAccept AckMode = iota
	// AckUpstream acknowledges only once every destination's upstream acknowledged the batch
	// holding the request (end to end, slower).
	AckUpstream
)

// ParseAckMode reads the -ack flag's value.
func ParseAckMode(s string) (AckMode, error) {
	switch s {
	case "accept":
		return AckAccept, nil
	case "upstream":
		return AckUpstream, nil
	}
	return 0, fmt.Errorf("fastpath: unknown ack mode %q (want accept or upstream)", s)
}

func (m AckMode) String() string {
	if m == AckUpstream {
		return "upstream"
	}
	return "accept"
}

// Config of the pipeline.
type Config struct {
	// QueueMaxBytes bounds the bytes admitted and not yet finished by every destination, open
	// batches included (-queue.max-bytes, default 256MiB). Requests past it are refused with
	// backpressure and counted in otlpgate_fastpath_refused_items_total{reason="queue_full"}.
	QueueMaxBytes int64
	// BatchMaxBytes seals a batch when the next request would take it past this size
	// (-batch.max-bytes, default 1MiB). A single larger request travels as a batch of its own.
	BatchMaxBytes int
	// BatchMaxItems seals a batch once it holds this many spans, points or records
	// (-batch.max-items, default 8192).
	BatchMaxItems int
	// BatchMaxAge seals a batch this long after its first request (-batch.max-age, default 200ms).
	BatchMaxAge time.Duration
	// Ack is when intakes acknowledge (-ack=accept|upstream, default accept).
	Ack AckMode
	// Eager batches as a group commit does (-batch.eager, default true). While the destinations
	// hold no sealed batch (none queued or in flight) a request is sealed at admission: an idle
	// path adds no batching delay. While they hold one, requests keep filling the open batch,
	// which is sealed the moment they finish the last one they hold, at BatchMaxBytes or
	// BatchMaxItems, or at BatchMaxAge, whichever comes first: batches grow only while the
	// destinations are busy, and BatchMaxAge bounds the wait instead of setting it.
	Eager bool
	// BatchMinGap, with Eager, keeps a signal's batches at least this far apart while requests
	// keep coming (-batch.min-gap, default DefaultMinGap, 200ms; UpstreamMinGap, 1ms, with
	// -ack=upstream unless given; 0 turns it off): a batch that would be sealed
	// within the gap of the signal's last sealed batch waits, with the requests after it, until
	// the gap has passed: then the next request seals it at admission (if the destinations are
	// still idle, else it leaves when they finish what they hold), or, when no request comes, a
	// timer a quarter of a gap later. At moderate rates against a quick upstream the destinations are idle
	// between requests, so Eager alone sends nearly every request on its own; the gap makes them
	// share upstream requests, for about the gap of added latency (at most 1.25 gaps for a
	// request followed by silence). A request after a quiet gap leaves at once. With
	// AckAccept a client is answered at admission, so the gap delays delivery, not the answer;
	// with AckUpstream the client waits for its batch, hence the shorter default there. A gap
	// longer than BatchMaxAge holds a batch until its age (so -batch.max-age=20ms alone does
	// not have to lower the gap too).
	BatchMinGap time.Duration
	// Processor, when set, runs on every resource entry of every request, from every intake,
	// before the request joins a batch or the spool: the byte-level steps of process/
	// (-resource.set, -resource.delete, -drop, -sample.traces). A request it leaves empty is
	// answered as admitted and admits nothing. nil runs no step.
	Processor Processor
	// Steps, when set, takes Processor's place: it holds the Processor in force, which a
	// reload replaces while requests flow (Steps.Set).
	Steps *Steps
	// Tenants, when set, is the tenant table of -intake.headers: a batch holds requests of one
	// tenant, and goes only to the destinations that take it (its Routes, numbered as the
	// destinations New is given). Requests admitted without a tenant (Consume, Admit) are the
	// default tenant's. nil: no tenants.
	Tenants *tenant.Table
	// PassThrough keeps the compressed bytes of a request that arrived gzip- or
	// zstd-compressed when every destination sends that compression and nothing rewrites the
	// request (-compression.passthrough, default true): the batch is the concatenation of the
	// requests' compressed members (passthrough.go). Counted in
	// otlpgate_fastpath_passthrough_requests_total{way}.
	PassThrough bool
	// Router, when set, routes each resource entry by its Resource's attributes (a -dest's
	// match=resource, route.go): a request is split into one piece per set of destinations
	// that take its entries, and each piece joins the batches of its route. Destinations are
	// numbered as New is given them, as the Tenants' routes are; SetDestinationsRoutes gives
	// a new set its own router (Routing). nil: every destination takes
	// every entry (of the tenants it takes).
	Router Router
	// Routing holds the router in force, which a reload of the destinations replaces with
	// them (routing.go): New and the spool's admission make their own from Router, and read
	// it rather than Router.
	Routing *Routing
	// Served is what signals the destinations take (-dest signals=): a request of a signal
	// none of its tenant's destinations takes is refused as ErrUnserved. The pipeline and the
	// spool's admission set it from their destinations (a new one when nil).
	Served *Served
	// Budget, when set, is what the processing steps write for a request of the intakes that
	// answer each request (gRPC, OTLP/HTTP: Admitter) past the request's own size is charged
	// to as it grows, beside the body the intake holds: the intake limiter's -intake.max-bytes
	// (budget.go says why a copy of the request's size is not charged again). A
	// request it has no room for is refused with ErrBudget, counted in
	// otlpgate_fastpath_refused_items_total{reason="intake_bytes"}. nil: charged to nothing
	// (QueueMaxBytes still bounds what processing may make of a request).
	Budget Budget
	// ConsumeBudget is Budget for the requests of Consume (UDS, Kafka): the intake limiter's
	// -intake.unauthenticated.max-bytes.
	ConsumeBudget Budget
}

// DefaultMinGap is BatchMinGap's default. At the rates most edge nodes see (50 to 200
// requests a second) the destinations are idle between requests, so without a gap every
// request is an upstream call of its own, and each call costs the proxy the wake-ups of a
// round trip (about 300 µs of CPU on an idle runtime, more than the request that caused it);
// 200ms makes about 10 requests share a call at 50 a second and 40 at 200 a second, for at
// most 200ms of added delivery latency (BatchMaxAge, 200ms by default, seals a batch that long
// after its first request whatever the gap), what the Collector's batch processor holds a
// batch by default (its 200ms timeout).
// The client's answer does not wait for it (AckAccept). docs/benchmarks.md, "Where the CPU
// goes at low rates", has the measurements that chose it.
const DefaultMinGap = 200 * time.Millisecond

// UpstreamMinGap is BatchMinGap's default with AckUpstream, where a client waits for its
// batch to be delivered: the gap would add to every answer.
const UpstreamMinGap = time.Millisecond

// Seal is the rule of BatchMaxBytes, BatchMaxItems and BatchMaxAge.
func (c Config) Seal() Seal {
	return Seal{MaxBytes: c.BatchMaxBytes, MaxItems: c.BatchMaxItems, MaxAge: c.BatchMaxAge}
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		QueueMaxBytes: 256 << 20,
		BatchMaxBytes: 1 << 20,
		BatchMaxItems: 8192,
		BatchMaxAge:   200 * time.Millisecond,
		Ack:           AckAccept,
		Eager:         true,
		BatchMinGap:   DefaultMinGap,
		PassThrough:   true,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.QueueMaxBytes <= 0:
		return errors.New("fastpath: queue max bytes must be positive")
	case c.BatchMaxBytes <= 0:
		return errors.New("fastpath: batch max bytes must be positive")
	case int64(c.BatchMaxBytes) > c.QueueMaxBytes:
		return fmt.Errorf("fastpath: batch max bytes %d exceeds queue max bytes %d", c.BatchMaxBytes, c.QueueMaxBytes)
	case c.BatchMaxItems <= 0:
		return errors.New("fastpath: batch max items must be positive")
	case c.BatchMaxAge <= 0:
		return errors.New("fastpath: batch max age must be positive")
	case c.BatchMinGap < 0:
		return errors.New("fastpath: batch min gap must not be negative")
	case c.Ack > AckUpstream:
		return fmt.Errorf("fastpath: bad ack mode %d", c.Ack)
	case c.Router != nil && c.Ack == AckUpstream:
		return errors.New("fastpath: -ack=upstream cannot be combined with match=resource: a split request has no single batch to wait on")
	}
	return nil
}

// ParseDepth reads a scan depth flag value: top, resource or full.
func ParseDepth(s string) (fastpath.Depth, error) {
	for d := fastpath.DepthTop; d <= fastpath.DepthFull; d++ {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("fastpath: unknown scan depth %q (want top, resource or full)", s)
}
