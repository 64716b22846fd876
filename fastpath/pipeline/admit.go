package pipeline

import (
	"errors"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
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
	admittedItems = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_admitted_items_total",
		Help: "Spans, data points and log records admitted into the pipeline.",
	}, []string{"signal"})
	admittedBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_admitted_bytes_total",
		Help: "Request bytes admitted into the pipeline.",
	}, []string{"signal"})
	refusedItems = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
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

// Prepared is Prepare's plan for a request: checked against the queue's bound and the
// destinations, run through the processing steps (Config.Processor), split by route, or kept
// compressed as it arrived. Pipeline and the spool's admission (spool/feed) both start with it,
// so that they check, process and count a request alike; each then holds Req (or Wire) its own
// way and reports the outcome with Admitted or Refused. Call Release once Req is no longer
// read.
type Prepared struct {
	Sig    fastpath.Signal
	Req    []byte // the request to admit: as received (decompressed), or the processed v1 body
	Items  int
	Layout fastpath.Layout
	Tenant *tenant.Tenant // nil without tenants (Config.Tenants)
	// Wire, with Encoding other than EncodingNone, is the request as received, compressed in
	// Encoding, which travels as it is (compressed pass-through); Req is then its
	// decompressed form, v1 with only resource entries.
	Wire     []byte
	Encoding Encoding

	dropped bool              // the steps removed every entry
	st      fastpath.Stripped // what the processing stripped, counted once the request is admitted
	proc    Processor
	tally   Tally
	out     charged // the processed body, pooled and charged; empty without a processor
	route   *Pieces // its entries by route (Config.Router); nil without routes
	// rs is the router route was split by, held until Release (Routing); nil without one.
	rs *routeSet
	// own is the caller's pooled buffer holding Req, offered for a fresh batch to adopt
	// (Request.Own, adopt.go); nil when not offered.
	own *[]byte
	// fellBack is set for a request that arrived compressed and goes the plain way, why says
	// why and plain is its decompressed size: counted once it is answered as admitted.
	fellBack bool
	why      Fallback
	plain    int
}

// Prepare makes req ready for admission under cfg, and returns its plan. It runs the steps of
// prepareSteps in order, each of which refuses the request, refines the plan, or ends the
// preparation there:
//
//  1. a known signal;
//  2. its tenant, req.Origin.Tenant (nil: the default one with cfg.Tenants), one some
//     destination takes (else tenant.ErrNoRoute: the default tenant of the UDS and Kafka
//     intakes, which read no headers, without a destination that takes it);
//  3. a destination takes its signal (-dest signals=; else ErrUnserved, counted as unserved);
//  4. a request that arrived compressed (req.Wire) in an encoding every destination that takes
//     its tenant sends (encs; nil: none does), with nothing below to rewrite it, keeps its
//     bytes as received, and the preparation ends there; else it goes the plain way, the
//     reason counted once it is answered as admitted (countFallback);
//  5. no larger than QueueMaxBytes (else ErrTooLarge, counted as too_large);
//  6. cfg.Processor's steps on each resource entry, with req.Origin.Peer as the client
//     address, whose errors refuse it whole. What they write past the request's own size (and
//     its slack) is charged to budget (nil: to none) as it grows, and held until Release: a
//     request whose output would pass QueueMaxBytes is refused as ErrTooLarge, one the budget
//     has no room for as ErrBudget, each counted (too_large, intake_bytes) before the rest of
//     its output is built;
//  7. its entries split by route: by the router in force (cfg.Routing, which a reload of the
//     destinations swaps with them, held until Release), else cfg.Router.
//
// A request the steps or the routes leave without entries is Dropped: the client is answered
// as admitted, and the steps' tally is committed now. Safe for concurrent use; req's bytes are
// only read until Release, req.Own not at all (adopt.go).
func Prepare(cfg *Config, budget Budget, encs *Encodings, req *Request) (Prepared, error) {
	in := prepareIn{cfg: cfg, budget: budget, encs: encs}
	r := Prepared{Sig: req.Signal, Req: req.Body, Items: req.Items, Layout: req.Layout, Tenant: req.Origin.Tenant}
	for _, step := range prepareSteps {
		end, err := r.run(step, &in, req)
		if err != nil {
			r.Release()
			return Prepared{}, err
		}
		if end {
			break
		}
	}
	if r.dropped && r.fellBack {
		countFallback(r.why, r.plain)
	}
	return r, nil
}

// prepareIn is what Prepare's steps read besides the request. The request is a parameter of
// its own: held in here, it would go to the heap with whatever a step hands on from here.
type prepareIn struct {
	cfg    *Config
	budget Budget
	encs   *Encodings
}

// prepareStep names a step of Prepare.
type prepareStep uint8

const (
	stepSignal prepareStep = iota
	stepTenant
	stepServed
	stepPassThrough
	stepSize
	stepProcess
	stepRoutes
)

// prepareSteps are Prepare's steps, in order. Each reads the request and the plan so far, and
// refuses the request (an error), refines the plan, or ends the preparation with the plan as it
// is (end). A new check or rewrite of a request before it joins a batch or the spool is a step
// here (and a case of run): it then holds for every intake and both admitters.
var prepareSteps = [...]prepareStep{stepSignal, stepTenant, stepServed, stepPassThrough, stepSize, stepProcess, stepRoutes}

// run runs one step of Prepare on the plan r of req. A switch rather than a table of
// functions: a call through a function value would make the plan and the request escape to
// the heap, and every request allocate.
func (r *Prepared) run(step prepareStep, in *prepareIn, req *Request) (end bool, err error) {
	switch step {
	case stepSignal:
		return r.knownSignal()
	case stepTenant:
		return r.routedTenant(in)
	case stepServed:
		return r.served(in)
	case stepPassThrough:
		return r.passThrough(in, req)
	case stepSize:
		return r.fits(in)
	case stepProcess:
		return r.process(in, req)
	case stepRoutes:
		return r.routes(in)
	}
	panic("BUG: pipeline: unknown preparation step")
}

// knownSignal refuses a signal the pipeline does not know.
func (r *Prepared) knownSignal() (bool, error) {
	if r.Sig >= fastpath.NumSignals {
		return false, errBadSignal
	}
	return false, nil
}

// routedTenant resolves the default tenant and refuses one no destination takes
// (match-header).
func (r *Prepared) routedTenant(in *prepareIn) (bool, error) {
	if r.Tenant == nil && in.cfg.Tenants != nil {
		r.Tenant = in.cfg.Tenants.Default()
	}
	// The intakes that read headers refuse such a tenant in Lookup already.
	return false, r.Tenant.CheckRouted()
}

// served refuses, and counts, a request of a signal no destination of its tenant takes (-dest
// signals=): seal must never be handed a batch no destination takes.
func (r *Prepared) served(in *prepareIn) (bool, error) {
	if unserved(in.cfg, r.Tenant, r.Sig, r.Items) {
		return false, ErrUnserved
	}
	return false, nil
}

// passThrough keeps a compressed request as it arrived when nothing would change it, and
// decides why not otherwise (passesTo).
func (r *Prepared) passThrough(in *prepareIn, req *Request) (bool, error) {
	if req.Encoding == EncodingNone {
		return false, nil
	}
	var dest Encoding
	if in.encs != nil {
		dest = in.encs.Of(r.Tenant)
	}
	if why, ok := passesTo(in.cfg, dest, r.Sig, req.Body, req.Encoding); !ok {
		r.fellBack, r.why, r.plain = true, why, len(req.Body)
		return false, nil
	}
	if int64(len(req.Wire)) > in.cfg.QueueMaxBytes || int64(len(req.Body)) > in.cfg.QueueMaxBytes {
		refusedItemsC[r.Sig][RefusedTooLarge].Add(float64(r.Items))
		return false, ErrTooLarge
	}
	r.Wire, r.Encoding, r.Layout = req.Wire, req.Encoding, fastpath.LayoutV1
	return true, nil
}

// fits refuses, and counts, a request larger than the whole queue.
func (r *Prepared) fits(in *prepareIn) (bool, error) {
	if int64(len(r.Req)) > in.cfg.QueueMaxBytes {
		refusedItemsC[r.Sig][RefusedTooLarge].Add(float64(r.Items))
		return false, ErrTooLarge
	}
	return false, nil
}

// process runs the processing steps in force on every entry (process.go): the plan's Req is
// then their output. A request they leave without entries is Dropped, its tally committed.
func (r *Prepared) process(in *prepareIn, req *Request) (bool, error) {
	proc := in.cfg.processor()
	if proc == nil {
		return false, nil
	}
	sig, n := r.Sig, len(r.Req)
	r.out = charged{b: in.budget, max: int(min(in.cfg.QueueMaxBytes, math.MaxInt)), free: pool.Cap(n + proc.Slack(sig, n) + maxEntryHeader)}
	left, st, tally, err := processEntries(proc, &r.out, sig, r.Req, r.Items, r.Layout, req.Origin.Peer)
	if err != nil {
		if why, ok := budgetRefusal(err); ok {
			refusedItemsC[sig][why].Add(float64(r.Items))
		}
		return false, err
	}
	if len(*r.out.buf) == 0 {
		// Every entry was dropped or sampled out: nothing is admitted, and the client is
		// answered Success.
		r.out.release()
		proc.Commit(sig, tally)
		r.drop()
		return true, nil
	}
	r.Req, r.Items, r.Layout, r.st = *r.out.buf, left, fastpath.LayoutV1, st
	r.proc, r.tally = proc, tally
	return false, nil
}

// routes splits the request by route (Config.Router's Split, into Pieces, route.go). A
// request no destination takes any entry of is Dropped: answered as admitted, its tally and
// its unrouted entries counted now.
func (r *Prepared) routes(in *prepareIn) (bool, error) {
	cfg := in.cfg
	rt, cand, served := cfg.Router, r.Tenant.RouteMask(), cfg.Served.of(r.Sig)
	if cfg.Routing != nil {
		// The router, the tenant routes and the signals of one set of destinations, held
		// until Release.
		rs := cfg.Routing.acquire()
		if rs == nil {
			return false, nil
		}
		rt, cand, served, r.rs = rs.rt, r.Tenant.RouteMaskIn(rs.tenants), rs.served[r.Sig], rs
	}
	if rt == nil {
		return false, nil
	}
	s := NewPieces(in.budget)
	if err := rt.Split(s, r.Sig, r.Req, r.Items, r.Layout, cand&served); err != nil {
		if why, ok := budgetRefusal(err); ok {
			refusedItemsC[r.Sig][why].Add(float64(r.Items))
		}
		s.Release()
		r.rs.release()
		r.rs = nil
		return false, err
	}
	r.route = s
	r.Items = max(r.Items-s.Lost, 0)
	if s.N == 0 && s.Unrouted > 0 {
		s.commit(r.Sig)
		if r.proc != nil {
			r.proc.Commit(r.Sig, r.tally)
		}
		r.Release()
		r.drop()
	}
	return r.dropped, nil
}

// drop leaves the plan of a request with nothing to admit: answered as admitted, its tally
// committed already. What it held is released.
func (r *Prepared) drop() {
	*r = Prepared{Sig: r.Sig, Tenant: r.Tenant, dropped: true, fellBack: r.fellBack, why: r.why, plain: r.plain}
}

// unserved reports, and counts, a request of tenant t (resolved: the default tenant for nil)
// and signal sig that no destination of its tenant takes (-dest signals=). seal must never be
// handed a batch no destination takes.
func unserved(cfg *Config, t *tenant.Tenant, sig fastpath.Signal, items int) bool {
	if cfg.Served.of(sig)&t.RouteMask() != 0 {
		return false
	}
	refusedItemsC[sig][RefusedUnserved].Add(float64(items))
	return true
}

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
	switch {
	case r.Encoding != EncodingNone:
		passRequestsC[1].Inc()
		passBytesC[1].Add(float64(len(r.Wire)))
	case r.fellBack:
		countFallback(r.why, r.plain)
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
		r.route.Release()
		r.route = nil
	}
	r.rs.release()
	r.rs = nil
}
