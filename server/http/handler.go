package httpserver

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// handle serves one request. It runs on the connection's fasthttp worker; the request body it
// reads belongs to fasthttp and is valid until handle returns, which is why admission copies
// it (into the batch) before the answer is written.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	s.inflight.Add(1)
	defer s.inflight.Done()
	// Every answer given before the body was read leaves it in the connection (StreamRequestBody):
	// settle drops it or closes the connection, so that the next request is read from its start.
	read := false
	defer s.settle(ctx, &read)
	hdr := &ctx.Request.Header
	// Errors are answered in the request's encoding when it has a known one, else in protobuf.
	f, known := parseMediaType(hdr.ContentType())
	if s.cors != nil {
		if origin := hdr.Peek("Origin"); s.cors.allowed(origin) {
			s.cors.decorate(ctx, origin)
		}
	}
	sig, ok := s.route(ctx.Path())
	if !ok {
		s.reject(ctx, f, rejectNotFound, s.replies.notFound)
		return
	}
	if !ctx.IsPost() {
		if ctx.IsOptions() && s.cors != nil && s.cors.preflight(ctx) {
			return
		}
		s.reject(ctx, f, rejectMethod, s.replies.method)
		if s.cors != nil {
			ctx.Response.Header.Set("Allow", "POST, OPTIONS")
		} else {
			ctx.Response.Header.Set("Allow", "POST")
		}
		return
	}
	if len(s.token) > 0 && subtle.ConstantTimeCompare(hdr.Peek("Authorization"), s.token) != 1 {
		s.reject(ctx, f, rejectUnauthenticated, s.replies.unauthenticated)
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		return
	}
	// The credential (-auth.tenants-file) is checked before anything else about the request is
	// answered: a client without one learns nothing of what the intake accepts.
	peer := remoteAddr(ctx)
	tenant, refused, why := s.tenant(ctx, peer)
	if refused != nil {
		s.reject(ctx, f, why, refused)
		if why == rejectUnauthenticated {
			ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		}
		return
	}
	if !known || (f == encJSON && !jsonSupported) {
		s.reject(ctx, encProto, rejectMediaType, s.replies.mediaType)
		return
	}
	cod := parseCoding(hdr.ContentEncoding())
	if cod == codingUnknown {
		s.reject(ctx, f, rejectEncoding, s.replies.coding)
		ctx.Response.Header.Set("Accept-Encoding", "gzip, zstd, identity")
		return
	}
	// A body larger than the limit is refused on its Content-Length, unread; fasthttp has read
	// a few KiB of it at most, and settle closes the connection rather than read the rest.
	cl := hdr.ContentLength() // -1: chunked, size unknown until read
	if cl > s.cfg.MaxRequestBytes {
		s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
		return
	}
	// The body's buffer takes its bytes from the intake limiter as it grows while the body
	// arrives, and the decompressed body's as it grows while it is inflated: a request holds
	// what it was sent and what it produced, never what it declared. A request refused before
	// any of its body was read keeps its connection (settle); the client waits meanwhile, held
	// back by TCP, up to -intake.wait.
	sc := getScratch()
	defer sc.release()
	sc.bind(&s.adm, s.waitCtx.Done())
	sc.req.Origin = pipeline.Origin{Tenant: tenant, Peer: peer}
	body, err := sc.readBody(&ctx.Request, cl, s.cfg.MaxRequestBytes)
	read = err != errBusy || sc.stream.streamed
	if err != nil {
		if read {
			ctx.SetConnectionClose()
		}
		switch err {
		case errBusy:
			s.refuseBusy(ctx, f)
		case errBodyTooLarge:
			s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
		default:
			s.reject(ctx, f, rejectCorrupt, s.replies.badRequest)
		}
		return
	}
	if cod != codingIdentity {
		dec, enc := s.dec.gzip, pipeline.EncodingGzip
		if cod == codingZstd {
			dec, enc = s.dec.zstd, pipeline.EncodingZstd
		}
		sc.req.Wire, sc.req.Encoding = body, enc
		if body, err = sc.decompress(dec, body, sizeHint(cod, body), s.cfg.MaxRequestBytes); err != nil {
			switch err {
			case errBusy:
				// Like any request the limiter refuses; the body was read, the connection
				// serves the next request.
				s.refuseBusy(ctx, f)
			case errBodyTooLarge:
				s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
			default:
				s.reject(ctx, f, rejectCorrupt, s.replies.corrupt)
			}
			return
		}
	}
	ctr.bytes[f][sig].Add(float64(len(body)))
	var b *pipeline.Batch
	var rejected int64
	var msg string
	var reason admission.Reason
	if f == encJSON {
		if b, reason, err = s.admitJSON(sc, sig, body); err != nil {
			sendStatus(ctx, f, fasthttp.StatusBadRequest, codes.InvalidArgument, "malformed OTLP/JSON request: "+strings.TrimPrefix(err.Error(), "fastpath: "))
			return
		}
	} else {
		b, rejected, msg, reason = s.admitProto(sc, sig, body)
	}
	// Admission copied what it kept: the reservation is free before -ack=upstream waits.
	sc.hold.Release()
	if reason == admission.Accepted {
		reason = ctr.await(s.waitCtx, f, sig, b, sc.items)
	}
	s.answer(ctx, f, sig, reason, rejected, msg, sc.wait)
}

// reasonBusy is the outcome of a request whose admission needed intake-limiter bytes the
// limiter did not have (the copy of a partially malformed request's good entries): answered
// like any request the limiter refuses.
const reasonBusy = admission.NumReasons

// reasonBodyTooLarge is the outcome of an OTLP/JSON request whose transcoded body would pass
// -http.max-request-bytes: answered 413, as a body that does on the wire.
const reasonBodyTooLarge = admission.NumReasons + 1

// answer writes the response for a request that reached admission; wait is the delay of a
// request refused for its tenant's rate.
func (s *Server) answer(ctx *fasthttp.RequestCtx, f format, sig fastpath.Signal, reason admission.Reason, rejected int64, msg string, wait time.Duration) {
	switch reason {
	case admission.Accepted:
		if msg != "" {
			sendPartial(ctx, f, sig, rejected, msg)
			return
		}
		sendOK(ctx, f)
	case admission.Invalid:
		send(ctx, f, s.replies.malformed)
	case admission.Full, admission.SpoolFull, admission.SpoolIO:
		r := s.replies.overloaded429
		if s.overloaded() {
			overloadAnswers.Inc()
			r = s.replies.overloaded503
		}
		sendRetry(ctx, f, r, s.adm.QueueDelay())
	case admission.TooLarge:
		// Not retryable: the request could never fit, however long the client waits.
		send(ctx, f, s.replies.queueTooLarge)
	case admission.Upstream:
		sendRetry(ctx, f, s.replies.upstream, s.adm.QueueDelay())
	case admission.Throttled:
		// Not overload: one tenant is over its rate, and it alone is told to wait.
		sendRetry(ctx, f, s.replies.tenantRate, wait)
	case admission.Unserved:
		send(ctx, f, s.replies.unserved)
	case reasonBusy:
		s.refuseBusy(ctx, f)
	case reasonBodyTooLarge:
		s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
	case admission.Busy:
		// The intake limiter had no room for what processing wrote: answered as its
		// refusals are, counted (intake_bytes) by admit.
		sendRetry(ctx, f, s.replies.busy, s.adm.BusyDelay())
	default: // admission.Closed, admission.Timeout
		send(ctx, f, s.replies.closed)
	}
}

// reject answers a request turned away before admission, and counts it.
func (s *Server) reject(ctx *fasthttp.RequestCtx, f format, why int, r *reply) {
	ctr.rejected[why].Inc()
	send(ctx, f, r)
}

// route maps a request path to its signal.
func (s *Server) route(path []byte) (fastpath.Signal, bool) {
	for i, p := range s.paths {
		if string(path) == p {
			return fastpath.Signal(i), true
		}
	}
	return 0, false
}

// parseMediaType reads a Content-Type: application/x-protobuf or application/json, with any
// parameters (charset=utf-8) ignored and the type compared without regard to case.
func parseMediaType(v []byte) (format, bool) {
	if i := bytes.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	v = bytes.TrimSpace(v)
	switch {
	case asciiEqualFold(v, ctProto):
		return encProto, true
	case asciiEqualFold(v, ctJSON):
		return encJSON, true
	}
	return encProto, false
}

// admitProto scans a protobuf request and admits it, or, when its scan fails, the resource
// entries of it that are well-formed. reason is -1 when something (or nothing, for an empty
// request) was admitted; msg is set when entries were dropped.
func (s *Server) admitProto(sc *scratch, sig fastpath.Signal, req []byte) (b *pipeline.Batch, rejected int64, msg string, reason admission.Reason) {
	scan, err := fastpath.ScanRequest(sig, req, fastpath.LayoutV1, s.cfg.ScanDepth)
	items := max(scan.Items, 0)
	if err != nil {
		if s.cfg.ScanDepth != fastpath.DepthFull {
			ctr.refuse(encProto, sig, admission.Invalid, 0)
			return nil, 0, "", admission.Invalid
		}
		// A request whose top level holds together may carry a few malformed resource
		// entries: keep the good ones and say which part was dropped, as the gRPC intake does.
		// Their copy is held before admission too, so it takes its bytes from the limiter, and
		// is not made for a request whose top level is broken (garbage, a bomb of zeros).
		if !entriesDelimited(req) {
			ctr.refuse(encProto, sig, admission.Invalid, 0)
			return nil, 0, "", admission.Invalid
		}
		if sc.out = sc.getCharged(len(req)); sc.out == nil {
			return nil, 0, "", reasonBusy
		}
		var e fastpath.Entries
		*sc.out, e, err = fastpath.AppendValidEntries(*sc.out, sig, req)
		if err != nil || e.Good == 0 {
			ctr.refuse(encProto, sig, admission.Invalid, 0)
			return nil, 0, "", admission.Invalid
		}
		ctr.partial[sig].Add(float64(e.Bad))
		req, items, rejected = *sc.out, e.Items, e.Rejected
		sc.req.Encoding = pipeline.EncodingNone // the admitted bytes are not the ones received
		msg = fmt.Sprintf("%d of %d resource entries were malformed and dropped", e.Bad, e.Good+e.Bad)
	} else if scan.Resources == 0 {
		return nil, 0, "", admission.Accepted
	}
	ctr.items[encProto][sig].Add(float64(items))
	ctr.reqs[encProto][sig].Inc()
	b, reason = s.admit(encProto, sc, sig, req, items)
	return b, rejected, msg, reason
}

// entriesDelimited reports whether req's top level holds together with every resource entry
// length-delimited: what fastpath.AppendValidEntries needs to salvage entries, checked without
// copying anything.
func entriesDelimited(req []byte) bool {
	it := fastpath.NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num == 1 && f.Type != protowire.BytesType {
			return false
		}
	}
	return it.Err() == nil
}

// admit hands a checked v1 request body of sc's tenant to the pipeline. Admission strips
// unknown top-level fields (and counts them), as for every intake. A request refused for its
// tenant's rate leaves the delay it is told in sc.wait.
func (s *Server) admit(f format, sc *scratch, sig fastpath.Signal, req []byte, items int) (*pipeline.Batch, admission.Reason) {
	// A body that is all of the scratch's buffer is not read past here unless refused, which
	// leaves it where it was.
	b, reason := s.adm.Admit(sc.request(f, sig, req, items))
	if reason == admission.Throttled {
		sc.wait = admission.TenantDelay(sc.req.Origin.Tenant, req, items)
	}
	if reason != admission.Accepted {
		ctr.refuse(f, sig, reason, items)
	} else {
		sc.items = items
	}
	return b, reason
}

// drainBelow is the largest unread body a refused request may leave and still keep its
// connection: reading and dropping a few KiB (mostly read already) is cheaper for a client
// under backpressure than a new connection; a larger body is left unread and the connection
// closed, since reading it is what the refusal is there to avoid.
const drainBelow = 64 << 10

// settle, once a request was answered, leaves its connection ready for the next one: a body
// that was not read is read and dropped when small, else the connection closes.
func (s *Server) settle(ctx *fasthttp.RequestCtx, read *bool) {
	if *read || !ctx.Request.IsBodyStream() {
		return
	}
	if cl := ctx.Request.Header.ContentLength(); cl < 0 || cl > drainBelow || !discardBody(&ctx.Request) {
		ctx.SetConnectionClose()
	}
}

// refuseBusy answers a request the intake limiter refused: 429 with Retry-After, like a full
// queue, the delay being the limiter's wait.
func (s *Server) refuseBusy(ctx *fasthttp.RequestCtx, f format) {
	ctr.rejected[rejectBusy].Inc()
	sendRetry(ctx, f, s.replies.busy, s.adm.BusyDelay())
}

// handleError answers what fasthttp could not read as a request: a body over the limit (413,
// decided on Content-Length before the body is read), a header over -http.max-header-bytes
// (431), a read timeout (408), anything else (400). fasthttp closes the connection afterwards.
func (s *Server) handleError(ctx *fasthttp.RequestCtx, err error) {
	f, _ := parseMediaType(ctx.Request.Header.ContentType())
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
	case errors.As(err, &small):
		s.reject(ctx, encProto, rejectHeader, s.replies.headerTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		s.reject(ctx, encProto, rejectHeader, s.replies.timeout)
	default:
		s.reject(ctx, encProto, rejectHeader, s.replies.badRequest)
	}
}
