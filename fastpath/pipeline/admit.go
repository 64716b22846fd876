package pipeline

import (
	"errors"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
)

// Admitter takes requests from the intakes that answer each request on its own (gRPC and
// OTLP/HTTP): a Pipeline, or with a spool the spool's admission (spool/feed). The intakes that
// only hand data on (UDS, Kafka) take a Consumer.
type Admitter interface {
	// Admit admits req (an OTEP request is re-tagged to v1 on the way in): its tenant,
	// req.Origin.Tenant (from Config.Tenants, -intake.headers; nil: the default tenant), goes
	// only to the destinations that take it, in batches of its requests alone; its client
	// address is handed to the processing steps; a compressed request (req.Wire) may travel as
	// it arrived, and a buffer the caller offers (req.Own) may become a batch's. With
	// AckUpstream it returns the batch holding the request, with a reference for the caller,
	// who waits on it and then calls Unref; otherwise nil. It fails with ErrFull (no room
	// now), ErrTooLarge, ErrClosed or a scan error. req's bytes are only read during the call.
	// Safe for concurrent use.
	Admit(req Request) (*Batch, error)
	// Ack is when the intakes may answer a request: AckUpstream when Admit returns a batch
	// to wait on. Safe for concurrent use.
	Ack() AckMode
	// RetryDelay is how long a client refused for want of room should wait before it tries
	// again. Safe for concurrent use.
	RetryDelay() time.Duration
}

// Refusal is why admission refused a request, the reason label of
// otlpgate_fastpath_refused_items_total.
type Refusal uint8

const (
	RefusedQueueFull Refusal = iota // -queue.max-bytes reached
	RefusedTooLarge                 // one request exceeds -queue.max-bytes
	RefusedSpoolFull                // -spool.max-bytes reached (spool/feed)
	RefusedSpoolIO                  // the spool could not write (spool/feed)
	RefusedBudget                   // the intake limiter had no room for the processed request (ErrBudget)
	RefusedUnserved                 // no destination takes its signal (-dest signals=, ErrUnserved)
	numRefusals
)

var refusalNames = [numRefusals]string{"queue_full", "too_large", "spool_full", "spool_io", "intake_bytes", "unserved"}

var (
	admittedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_admitted_items_total",
		Help: "Spans, data points and log records admitted into the pipeline.",
	}, []string{"signal"})
	admittedBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_admitted_bytes_total",
		Help: "Request bytes admitted into the pipeline.",
	}, []string{"signal"})
	refusedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_refused_items_total",
		Help: "Items refused at admission, by reason (queue_full: -queue.max-bytes reached; too_large: one request exceeds it, as received or as processing would make it; spool_full: -spool.max-bytes reached; spool_io: the spool could not write; intake_bytes: -intake.max-bytes (or -intake.unauthenticated.max-bytes) had no room for what processing writes; unserved: no destination takes the signal, -dest signals=).",
	}, []string{"signal", "reason"})
	strippedFields = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_stripped_fields_total",
		Help: "Top-level fields of admitted requests other than the resource entries (and the OTEP id), left out of the batch: they mean nothing once requests are concatenated.",
	}, []string{"signal"})
	strippedBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_stripped_bytes_total",
		Help: "Bytes of the top-level fields counted in otlpgate_fastpath_stripped_fields_total.",
	}, []string{"signal"})

	// The label children, resolved once so that admission never formats a label.
	admittedItemsC, admittedBytesC  = bySignal(admittedItems), bySignal(admittedBytes)
	strippedFieldsC, strippedBytesC = bySignal(strippedFields), bySignal(strippedBytes)
	refusedItemsC                   = func() (c [fastpath.NumSignals][numRefusals]prometheus.Counter) {
		for s := range fastpath.NumSignals {
			for r := range numRefusals {
				c[s][r] = refusedItems.WithLabelValues(s.String(), refusalNames[r])
			}
		}
		return c
	}()
)

func bySignal(v *prometheus.CounterVec) (c [fastpath.NumSignals]prometheus.Counter) {
	for s := range fastpath.NumSignals {
		c[s] = v.WithLabelValues(s.String())
	}
	return c
}

var errBadSignal = errors.New("fastpath: unknown signal")

// Prepared is a request made ready for admission by Prepare: checked against the queue's
// bound and run through the processing steps (Config.Processor). Pipeline and the spool's
// admission (spool/feed) both start with it, so that they check, process and count a request
// alike; each then holds Req its own way and reports the outcome with Admitted or Refused.
// Call Release once Req is no longer read.
type Prepared struct {
	Sig    fastpath.Signal
	Req    []byte // the request to admit: as received, or the processed v1 body
	Items  int
	Layout fastpath.Layout
	Tenant *tenant.Tenant // nil without tenants (Config.Tenants)

	dropped bool              // the steps removed every entry
	st      fastpath.Stripped // what the processing stripped, counted once the request is admitted
	proc    Processor
	tally   Tally
	out     charged        // the processed body, pooled and charged; empty without a processor
	route   *routeSplitter // its entries by route (Config.Router); nil without routes
	// rs is the router route was split by, held until Release (Routing); nil without one.
	rs *routeSet
	// own is the caller's pooled buffer holding Req, offered for a fresh batch to adopt
	// (Request.Own, adopt.go); nil when not offered.
	own *[]byte
	// wire is the size of the request as received, when it is kept compressed (PrepareWire);
	// Req is then its decompressed form.
	wire int
}

// Prepare checks req for admission under cfg: a known signal, a tenant (req.Origin.Tenant,
// t below) some destination takes (else tenant.ErrNoRoute: the default tenant of the UDS and
// Kafka intakes, which read no headers; t nil is the default tenant with cfg.Tenants), no
// larger than QueueMaxBytes (else ErrTooLarge, counted as too_large), and runs cfg.Processor
// on it, with req.Origin.Peer as its client address, whose errors refuse it whole. A request
// the steps leave without entries is Dropped: the client is answered as admitted, and the
// steps' tally is committed now. What the steps write past the request's own size (and its
// slack) is charged to budget (nil: to none) as it grows, and held until Release: a request
// whose output would pass QueueMaxBytes is refused as ErrTooLarge, one the budget has no
// room for as ErrBudget, each counted (too_large, intake_bytes) before the rest of its output
// is built. req.Wire and req.Own are not read (PrepareWire, adopt.go). Safe for concurrent
// use; req.Body is only read until Release.
func Prepare(cfg *Config, budget Budget, req *Request) (Prepared, error) {
	sig, t, items := req.Signal, req.Origin.Tenant, req.Items
	if sig >= fastpath.NumSignals {
		return Prepared{}, errBadSignal
	}
	if t == nil && cfg.Tenants != nil {
		t = cfg.Tenants.Default()
	}
	if err := t.CheckRouted(); err != nil {
		// The intakes that read headers refuse such a tenant in Lookup already.
		return Prepared{}, err
	}
	if unserved(cfg, t, sig, items) {
		return Prepared{}, ErrUnserved
	}
	if int64(len(req.Body)) > cfg.QueueMaxBytes {
		refusedItemsC[sig][RefusedTooLarge].Add(float64(items))
		return Prepared{}, ErrTooLarge
	}
	r := Prepared{Sig: sig, Req: req.Body, Items: items, Layout: req.Layout, Tenant: t}
	proc := cfg.processor()
	if proc == nil {
		if err := r.routes(cfg, budget); err != nil {
			return Prepared{}, err
		}
		return r, nil
	}
	n := len(req.Body)
	r.out = charged{b: budget, max: int(min(cfg.QueueMaxBytes, math.MaxInt)), free: pool.Cap(n + proc.Slack(sig, n) + maxEntryHeader)}
	left, st, tally, err := processEntries(proc, &r.out, sig, req.Body, items, req.Layout, req.Origin.Peer)
	if err != nil {
		if why, ok := budgetRefusal(err); ok {
			refusedItemsC[sig][why].Add(float64(items))
		}
		return Prepared{}, err
	}
	if len(*r.out.buf) == 0 {
		// Every entry was dropped or sampled out: nothing is admitted, and the client is
		// answered Success.
		r.out.release()
		proc.Commit(sig, tally)
		return Prepared{Sig: sig, Tenant: t, dropped: true}, nil
	}
	r.Req, r.Items, r.Layout, r.st = *r.out.buf, left, fastpath.LayoutV1, st
	r.proc, r.tally = proc, tally
	if err := r.routes(cfg, budget); err != nil {
		r.Release()
		return Prepared{}, err
	}
	return r, nil
}

// unserved reports, and counts, a request of tenant t (resolved: the default tenant for nil)
// and signal sig that no destination of its tenant takes (-dest signals=). seal must never be
// handed a batch no destination takes.
// Serves reports whether a request of sig for tenant t (nil: the default tenant) would find a
// destination now, counting nothing: for an intake that can tell its clients ahead what to send
// (the Kafka listener's subscriptions) rather than refuse what they sent.
func Serves(cfg *Config, t *tenant.Tenant, sig fastpath.Signal) bool {
	if sig >= fastpath.NumSignals {
		return false
	}
	if t == nil && cfg.Tenants != nil {
		t = cfg.Tenants.Default()
	}
	if t != nil && !t.Routed() {
		return false
	}
	return cfg.Served.of(sig)&t.RouteMask() != 0
}

func unserved(cfg *Config, t *tenant.Tenant, sig fastpath.Signal, items int) bool {
	if cfg.Served.of(sig)&t.RouteMask() != 0 {
		return false
	}
	refusedItemsC[sig][RefusedUnserved].Add(float64(items))
	return true
}

// routes splits the request by route (Config.Router, route.go). A request no destination
// takes any entry of is Dropped: answered as admitted, its tally and its unrouted entries
// counted now.
func (r *Prepared) routes(cfg *Config, budget Budget) error {
	rt, cand, served := cfg.Router, r.Tenant.RouteMask(), cfg.Served.of(r.Sig)
	if cfg.Routing != nil {
		// The router, the tenant routes and the signals of one set of destinations, held
		// until Release.
		rs := cfg.Routing.acquire()
		if rs == nil {
			return nil
		}
		rt, cand, served, r.rs = rs.rt, r.Tenant.RouteMaskIn(rs.tenants), rs.served[r.Sig], rs
	}
	if rt == nil {
		return nil
	}
	s, err := splitRoutes(rt, budget, cand, served, r.Sig, r.Req, r.Items, r.Layout)
	if err != nil {
		if why, ok := budgetRefusal(err); ok {
			refusedItemsC[r.Sig][why].Add(float64(r.Items))
		}
		r.rs.release()
		r.rs = nil
		return err
	}
	r.route = s
	r.Items = max(r.Items-s.lost, 0)
	if s.n == 0 && s.unrouted > 0 {
		s.commit(r.Sig)
		if r.proc != nil {
			r.proc.Commit(r.Sig, r.tally)
		}
		r.Release()
		*r = Prepared{Sig: r.Sig, Tenant: r.Tenant, dropped: true}
	}
	return nil
}

// Dropped reports that the processing steps removed every entry: there is nothing to admit,
// and the request is answered as admitted.
func (r *Prepared) Dropped() bool { return r.dropped }

// Admitted counts the request as admitted, with st the top-level fields stripped on its way
// in (AppendEntries), and commits what the processing steps did: a request refused and sent
// again is counted once, when it gets in.
func (r *Prepared) Admitted(st fastpath.Stripped) {
	admittedItemsC[r.Sig].Add(float64(r.Items))
	admittedBytesC[r.Sig].Add(float64(len(r.Req)))
	r.Tenant.CountAdmitted(r.Items, len(r.Req))
	if st.Fields += r.st.Fields; st.Fields > 0 {
		st.Bytes += r.st.Bytes
		strippedFieldsC[r.Sig].Add(float64(st.Fields))
		strippedBytesC[r.Sig].Add(float64(st.Bytes))
	}
	if r.proc != nil {
		r.proc.Commit(r.Sig, r.tally)
	}
	if r.route != nil {
		r.route.commit(r.Sig)
	}
	if r.wire > 0 {
		passRequestsC[1].Inc()
		passBytesC[1].Add(float64(r.wire))
	}
}

// Refused counts the request's items as refused for reason.
func (r *Prepared) Refused(reason Refusal) {
	refusedItemsC[r.Sig][reason].Add(float64(r.Items))
}

// Release returns the processed body to the pool; Req must not be read after it. Calling it
// again does nothing.
func (r *Prepared) Release() {
	if r.out.buf != nil {
		r.out.release()
		r.Req = nil
	}
	if r.route != nil {
		r.route.release()
		r.route = nil
	}
	r.rs.release()
	r.rs = nil
}
