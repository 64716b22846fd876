package feed

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/otlpgate/otlpgate/spool"
)

// Errors of Admission when the spool cannot take a request now. Both are pipeline.ErrFull to
// the intakes (errors.Is), which answer with backpressure; each is counted under its own
// reason of otlpgate_fastpath_refused_items_total (spool_full, spool_io), and of the intakes'
// refusal counters, which tell them apart from a full queue.
var (
	ErrSpoolFull = pipeline.ErrSpoolFull
	ErrSpoolIO   = pipeline.ErrSpoolIO
)

// Admission admits requests into the spool: with -spool.dir it stands where the pipeline
// stands without one, in front of every intake. Each request is checked and processed as the
// pipeline does (pipeline.Prepare), stripped to its v1 resource entries (as a batch would
// carry it) in a pooled buffer, appended, and answered once Append returned. It holds nothing
// after admission: the Feeders deliver from the spool. Config.QueueMaxBytes bounds only what
// a single request may be.
//
// A request that arrived compressed (pipeline.Request.Wire) is spooled as it arrived when the
// pipeline would have let it pass through (-compression.passthrough): the feeders of
// destinations that send its encoding hand its bytes on as they are, and the others inflate
// it.
//
// It implements pipeline.Admitter and pipeline.Consumer. Every method is safe for concurrent
// use.
type Admission struct {
	cfg    pipeline.Config
	s      *spool.Spool
	encs   atomic.Pointer[pipeline.Encodings] // the destinations' (SetDestinations)
	closed atomic.Bool
}

var (
	_ pipeline.Admitter = (*Admission)(nil)
	_ pipeline.Consumer = (*Admission)(nil)
)

// NewAdmission returns the admission into s under cfg. -ack=upstream has no meaning with a
// spool (requests are acknowledged once spooled) and is refused. Close stops it; the spool
// is the caller's to close, after.
func NewAdmission(cfg pipeline.Config, s *spool.Spool) (*Admission, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Ack == pipeline.AckUpstream {
		return nil, errors.New("feed: -ack=upstream cannot be combined with a spool: requests are acknowledged once spooled")
	}
	if s == nil {
		return nil, errors.New("feed: no spool")
	}
	if !s.TakesEncoded() {
		// A spool opened without compressed records: requests that arrived compressed are
		// spooled plain, counted as the pass-through being off.
		cfg.PassThrough = false
	}
	if cfg.Served == nil {
		cfg.Served = new(pipeline.Served)
	}
	var routes *tenant.Routes
	if cfg.Tenants != nil {
		routes = cfg.Tenants.Routes()
	}
	cfg.Routing = pipeline.NewRouting(cfg.Router, routes)
	a := &Admission{cfg: cfg, s: s}
	a.encs.Store(&pipeline.Encodings{})
	return a, nil
}

// SetDestinationsRouter is SetDestinations for destinations whose match=resource rt routes
// by (nil: none), numbered as dests, with the tenant routes the table holds now (set them
// first): the requests admitted from now on are split by rt. It returns once every request
// split by the previous router is in the spool, so that the records written until then
// (Spool.Written, read after it) go by the previous routes, and the later ones by rt: each
// record by the router that split it.
func (a *Admission) SetDestinationsRouter(dests []pipeline.Destination, rt pipeline.Router) {
	e := pipeline.EncodingsOf(dests)
	a.encs.Store(&e)
	a.cfg.Served.Set(dests)
	var routes *tenant.Routes
	if a.cfg.Tenants != nil {
		routes = a.cfg.Tenants.Routes()
	}
	a.cfg.Routing.Set(rt, routes, dests)
}

// SetDestinations tells admission what the destinations send pass-through batches in, in the
// order of the tenant routes' numbering: a compressed request is spooled as it arrived only
// when every destination that takes it sends its encoding, so that no feeder inflates a
// record but after a change of destinations. Until the first call, none does, and every
// signal is taken; after it, a request of a signal no destination takes is refused
// (pipeline.ErrUnserved).
func (a *Admission) SetDestinations(dests []pipeline.Destination) {
	a.SetDestinationsRouter(dests, a.cfg.Routing.Router())
}

// Admit appends req to the spool, in a record that keeps its tenant (nil: the default
// tenant) as its meta (Tenant.Record), for the feeders to read back; its client address is
// written into the record by the processing steps, if they are asked to. A request that
// arrived compressed (req.Wire) is spooled as it arrived when the pipeline would have let it
// pass through, else its decompressed body is, the reason counted in
// otlpgate_fastpath_passthrough_fallback_requests_total; a buffer offered with it (req.Own) is
// not taken over. It returns no batch: the request is answered once appended. It fails with
// ErrSpoolFull or ErrSpoolIO (both pipeline.ErrFull), pipeline.ErrTooLarge, pipeline.ErrClosed
// or a scan error. req's bytes are only read during the call.
func (a *Admission) Admit(req pipeline.Request) (*pipeline.Batch, error) {
	return nil, a.admit(a.cfg.Budget, &req)
}

// Consume appends req.Body, a v1 request body, from req.Origin (the default tenant),
// charging what its processing writes to ConsumeBudget: it implements pipeline.Consumer.
func (a *Admission) Consume(req pipeline.Request) error {
	return a.admit(a.cfg.ConsumeBudget, &pipeline.Request{Signal: req.Signal, Origin: req.Origin, Body: req.Body, Items: req.Items})
}

// Serves reports whether sig has a destination now, for the default tenant: it implements
// pipeline.Serving.
func (a *Admission) Serves(sig fastpath.Signal) bool { return pipeline.Serves(&a.cfg, nil, sig) }

// admit prepares req as the pipeline does (pipeline.Prepare), charging what processing writes
// to budget (the intake limiter's budget of the intake it came from), and appends it: as it
// arrived, when its plan keeps it compressed (a zstd record begins with pipeline.ZstdPreamble,
// so that records concatenated into a batch stay one), else its v1 entries.
func (a *Admission) admit(budget pipeline.Budget, req *pipeline.Request) error {
	if a.closed.Load() {
		return pipeline.ErrClosed
	}
	r, err := pipeline.Prepare(&a.cfg, budget, a.encs.Load(), req)
	if err != nil || r.Dropped() {
		return err
	}
	defer r.Release()
	if r.Encoding != pipeline.EncodingNone {
		var prefix []byte
		if r.Encoding == pipeline.EncodingZstd {
			prefix = pipeline.ZstdPreamble[:]
		}
		_, err = a.s.Append(spool.Record{Signal: uint8(r.Sig), Items: uint32(r.Items), Meta: metaOf(r.Tenant), Encoding: uint8(r.Encoding), Plain: uint32(len(r.Req)), Prefix: prefix, Payload: r.Wire})
		return a.appended(&r, fastpath.Stripped{}, err)
	}
	var st fastpath.Stripped
	rec, ok := r.Entries() // the request is its own record: appended without a copy
	if !ok {
		buf := pool.GetBytes(len(r.Req))
		defer pool.PutBytes(buf)
		// With routes (-dest match=resource) the record holds the entries some destination
		// takes, and each feeder keeps those of its own destination (Router.Filter): one record,
		// so a request is spooled whole or not at all, however its entries are routed.
		if *buf, st, err = r.AppendEntries((*buf)[:0]); err != nil {
			return err
		}
		rec = *buf
	}
	if len(rec) > 0 {
		_, err = a.s.Append(spool.Record{Signal: uint8(r.Sig), Items: uint32(r.Items), Meta: metaOf(r.Tenant), Payload: rec})
	}
	return a.appended(&r, st, err)
}

// metaOf is the meta of a record of tenant t: none without tenants.
func metaOf(t *tenant.Tenant) []byte {
	if t == nil {
		return nil
	}
	return t.Record()
}

// appended answers the request r after its Append returned err, and counts it.
func (a *Admission) appended(r *pipeline.Prepared, st fastpath.Stripped, err error) error {
	switch {
	case err == nil:
		r.Admitted(st)
		return nil
	case errors.Is(err, spool.ErrFull):
		r.Refused(pipeline.RefusedSpoolFull)
		return ErrSpoolFull
	case errors.Is(err, spool.ErrTooLarge):
		r.Refused(pipeline.RefusedTooLarge)
		return pipeline.ErrTooLarge
	case errors.Is(err, spool.ErrClosed):
		return pipeline.ErrClosed
	}
	r.Refused(pipeline.RefusedSpoolIO) // and counted by the spool with its cause
	return ErrSpoolIO
}

// Ack is pipeline.AckAccept: a request is answered once it is spooled.
func (a *Admission) Ack() pipeline.AckMode { return pipeline.AckAccept }

// RetryDelay is what a client refused for want of spool room is told to wait. The spool
// drains at the pace of its feeders, which admission does not see, so it is the delay the
// pipeline gives while it knows no drain rate.
func (a *Admission) RetryDelay() time.Duration { return 5 * time.Second }

// QueuedBytes is 0: admission holds nothing once a request is spooled.
func (a *Admission) QueuedBytes() int64 { return 0 }

// Flush does nothing: admission builds no batches (the Feeders do).
func (a *Admission) Flush() {}

// Close refuses new requests. It does not close the spool.
func (a *Admission) Close() { a.closed.Store(true) }
