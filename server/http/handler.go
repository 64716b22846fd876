package httpserver

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc/codes"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// handle serves one request. It runs on the connection's fasthttp worker; the request body it
// reads belongs to fasthttp and is valid until handle returns, which is why admission copies
// it (into the batch) before the answer is written.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	s.inflight.Add(1)
	defer s.inflight.Done()
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
	body := ctx.PostBody()
	if len(body) > s.cfg.MaxRequestBytes {
		// fasthttp refuses such bodies before the handler runs (see handleError); this only
		// guards against that check ever moving.
		s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
		return
	}
	sc := getScratch()
	defer sc.release()
	if cod != codingIdentity {
		dec := s.dec.gzip
		if cod == codingZstd {
			dec = s.dec.zstd
		}
		var err error
		if body, err = sc.decompress(dec, body, s.cfg.MaxRequestBytes); err != nil {
			if err == errBodyTooLarge {
				s.reject(ctx, f, rejectBodyTooLarge, s.replies.bodyTooLarge)
			} else {
				s.reject(ctx, f, rejectCorrupt, s.replies.corrupt)
			}
			return
		}
	}
	ctr.bytes[f][sig].Add(float64(len(body)))
	var b *fastpath.Batch
	var rejected int64
	var msg string
	reason := -1
	if f == encJSON {
		var err error
		if b, reason, err = s.admitJSON(sc, sig, body); err != nil {
			sendStatus(ctx, f, fasthttp.StatusBadRequest, codes.InvalidArgument, "malformed OTLP/JSON request: "+strings.TrimPrefix(err.Error(), "fastpath: "))
			return
		}
	} else {
		b, rejected, msg, reason = s.admitProto(sc, sig, body)
	}
	if reason == -1 {
		reason = s.await(b)
	}
	s.answer(ctx, f, sig, reason, rejected, msg)
}

// answer writes the response for a request that reached admission.
func (s *Server) answer(ctx *fasthttp.RequestCtx, f format, sig fastpath.Signal, reason int, rejected int64, msg string) {
	switch reason {
	case -1:
		if msg != "" {
			sendPartial(ctx, f, sig, rejected, msg)
			return
		}
		sendOK(ctx, f)
	case refusedInvalid:
		send(ctx, f, s.replies.malformed)
	case refusedFull:
		r := s.replies.overloaded429
		if s.overloaded() {
			overloadAnswers.Inc()
			r = s.replies.overloaded503
		}
		sendRetry(ctx, f, r, s.p.RetryDelay())
	case refusedTooLarge:
		// Not retryable: the request could never fit, however long the client waits.
		send(ctx, f, s.replies.queueTooLarge)
	case refusedUpstream:
		sendRetry(ctx, f, s.replies.overloaded503, s.p.RetryDelay())
	default: // refusedClosed, refusedTimeout
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
func (s *Server) admitProto(sc *scratch, sig fastpath.Signal, req []byte) (b *fastpath.Batch, rejected int64, msg string, reason int) {
	scan, err := fastpath.ScanRequest(sig, req, fastpath.LayoutV1, s.cfg.ScanDepth)
	items := max(scan.Items, 0)
	if err != nil {
		if s.cfg.ScanDepth != fastpath.DepthFull {
			ctr.refuse(encProto, sig, refusedInvalid, 0)
			return nil, 0, "", refusedInvalid
		}
		// A request whose top level holds together may carry a few malformed resource
		// entries: keep the good ones and say which part was dropped, as the gRPC intake does.
		sc.out = pool.GetBytes(len(req))
		var e fastpath.Entries
		*sc.out, e, err = fastpath.AppendValidEntries(*sc.out, sig, req)
		if err != nil || e.Good == 0 {
			ctr.refuse(encProto, sig, refusedInvalid, 0)
			return nil, 0, "", refusedInvalid
		}
		ctr.partial[sig].Add(float64(e.Bad))
		req, items, rejected = *sc.out, e.Items, e.Rejected
		msg = fmt.Sprintf("%d of %d resource entries were malformed and dropped", e.Bad, e.Good+e.Bad)
	} else if scan.Resources == 0 {
		return nil, 0, "", -1
	}
	ctr.items[encProto][sig].Add(float64(items))
	b, reason = s.admit(encProto, sig, req, items)
	return b, rejected, msg, reason
}

// admit hands a checked v1 request body to the pipeline.
func (s *Server) admit(f format, sig fastpath.Signal, req []byte, items int) (*fastpath.Batch, int) {
	b, err := s.p.Admit(sig, req, items, fastpath.LayoutV1)
	if err == nil {
		if s.refusingSince.Load() != 0 {
			s.refusingSince.Store(0)
		}
		return b, -1
	}
	reason := reasonOf(err)
	ctr.refuse(f, sig, reason, items)
	return nil, reason
}

// reasonOf maps an admission error to a refusal reason.
func reasonOf(err error) int {
	switch {
	case errors.Is(err, fastpath.ErrFull):
		return refusedFull
	case errors.Is(err, fastpath.ErrTooLarge):
		return refusedTooLarge
	case errors.Is(err, fastpath.ErrClosed):
		return refusedClosed
	}
	return refusedInvalid
}

// await waits for an upstream batch (-ack=upstream) and reports the refusal reason, -1 when
// delivered.
func (s *Server) await(b *fastpath.Batch) int {
	if b == nil {
		return -1
	}
	ok, err := b.Wait(s.waitCtx)
	b.Unref()
	switch {
	case err != nil:
		return refusedTimeout
	case !ok:
		return refusedUpstream
	}
	return -1
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
