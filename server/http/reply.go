package httpserver

import (
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

const (
	ctProto = "application/x-protobuf"
	ctJSON  = "application/json"
)

var contentTypes = [numFormats]string{ctProto, ctJSON}

// reply is a fixed error answer: an HTTP status and a google.rpc.Status body in each format,
// marshalled once so that refusing a request, which happens most under overload, costs nothing.
type reply struct {
	status int
	body   [numFormats][]byte
}

func newReply(httpStatus int, code codes.Code, msg string) *reply {
	st := &spb.Status{Code: int32(code), Message: msg}
	pb, err := proto.Marshal(st)
	if err != nil {
		panic("BUG: httpserver: cannot marshal a status: " + err.Error())
	}
	js, err := protojson.Marshal(st)
	if err != nil {
		panic("BUG: httpserver: cannot marshal a status: " + err.Error())
	}
	return &reply{status: httpStatus, body: [numFormats][]byte{pb, js}}
}

// Messages shared with the gRPC intake's answers, so that an operator reads the same words
// whichever protocol a client used.
const (
	msgMalformed  = "malformed OTLP request"
	msgOverloaded = "otlpgate is overloaded: retry after the given delay"
	msgUpstream   = "upstream unavailable: a destination could not deliver the request (-ack=upstream): retry after the given delay"
	msgTooLarge   = "request larger than the whole queue (-queue.max-bytes)"
	msgClosed     = "otlpgate is shutting down"
	msgToken      = "missing or wrong bearer token"
	msgBusy       = "otlpgate intake is busy (-intake.max-bytes): retry after the given delay"
	// Tenant headers (-intake.headers).
	msgTooManyTenants = "too many distinct tenant header values (-intake.max-tenants reached): a new value is refused until a known one has been idle for -intake.tenant-idle"
	msgBadTenant      = "a tenant header value is longer than 255 bytes or not printable ASCII"
	msgNoRoute        = "no destination takes this tenant header value (match-header)"
	msgTenantRate     = "the tenant is over its rate (-tenant.rate): retry after the given delay"
	msgPeerTenants    = "this client address brought too many distinct tenant header values (-intake.max-tenants-per-peer reached): a new value is refused until one of them has been idle for -intake.tenant-idle"
	msgCredential     = "missing or unknown bearer token (-auth.tenants-file)"
	msgTenantClaim    = "the tenant headers do not match the bearer token's tenant (-auth.tenants-file): send the token's values or leave the headers out"
)

// replies are the fixed answers of one server (some name its configured limits).
type replies struct {
	notFound, method, mediaType, coding, bodyTooLarge, corrupt, unauthenticated *reply
	malformed, overloaded429, overloaded503, upstream, queueTooLarge, closed    *reply
	headerTooLarge, badRequest, timeout, busy                                   *reply
	tooManyTenants, badTenant, noRoute, tenantRate                              *reply
	peerTenants, credential, tenantClaim, unserved                              *reply
}

func newReplies(cfg Config) *replies {
	return &replies{
		notFound: newReply(fasthttp.StatusNotFound, codes.NotFound,
			fmt.Sprintf("unknown path: OTLP/HTTP takes POST %s, %s and %s", cfg.TracesPath, cfg.MetricsPath, cfg.LogsPath)),
		method:    newReply(fasthttp.StatusMethodNotAllowed, codes.Unimplemented, "method not allowed: OTLP/HTTP takes POST"),
		mediaType: newReply(fasthttp.StatusUnsupportedMediaType, codes.InvalidArgument, "unsupported Content-Type: use application/x-protobuf or application/json"),
		coding:    newReply(fasthttp.StatusUnsupportedMediaType, codes.InvalidArgument, "unsupported Content-Encoding: use gzip, zstd or identity"),
		bodyTooLarge: newReply(fasthttp.StatusRequestEntityTooLarge, codes.InvalidArgument,
			fmt.Sprintf("request body larger than %d bytes (-http.max-request-bytes), compressed or not", cfg.MaxRequestBytes)),
		corrupt:         newReply(fasthttp.StatusBadRequest, codes.InvalidArgument, "cannot decompress the request body"),
		unauthenticated: newReply(fasthttp.StatusUnauthorized, codes.Unauthenticated, msgToken),
		malformed:       newReply(fasthttp.StatusBadRequest, codes.InvalidArgument, msgMalformed),
		overloaded429:   newReply(fasthttp.StatusTooManyRequests, codes.ResourceExhausted, msgOverloaded),
		overloaded503:   newReply(fasthttp.StatusServiceUnavailable, codes.Unavailable, msgOverloaded),
		upstream:        newReply(fasthttp.StatusServiceUnavailable, codes.Unavailable, msgUpstream),
		busy:            newReply(fasthttp.StatusTooManyRequests, codes.ResourceExhausted, msgBusy),
		queueTooLarge:   newReply(fasthttp.StatusRequestEntityTooLarge, codes.ResourceExhausted, msgTooLarge),
		closed:          newReply(fasthttp.StatusServiceUnavailable, codes.Unavailable, msgClosed),
		headerTooLarge:  newReply(fasthttp.StatusRequestHeaderFieldsTooLarge, codes.InvalidArgument, "request header too large (-http.max-header-bytes)"),
		badRequest:      newReply(fasthttp.StatusBadRequest, codes.InvalidArgument, "cannot parse the HTTP request"),
		timeout:         newReply(fasthttp.StatusRequestTimeout, codes.DeadlineExceeded, "request not received in time (-http.read-timeout)"),
		// Not 429: the bound holds until a tenant has been idle for -intake.tenant-idle (10m
		// by default), so a client retrying soon would only be refused again. OTLP clients drop what a 4xx other than 429 refuses.
		tooManyTenants: newReply(fasthttp.StatusForbidden, codes.ResourceExhausted, msgTooManyTenants),
		badTenant:      newReply(fasthttp.StatusBadRequest, codes.InvalidArgument, msgBadTenant),
		noRoute:        newReply(fasthttp.StatusForbidden, codes.PermissionDenied, msgNoRoute),
		tenantRate:     newReply(fasthttp.StatusTooManyRequests, codes.ResourceExhausted, msgTenantRate),
		peerTenants:    newReply(fasthttp.StatusForbidden, codes.ResourceExhausted, msgPeerTenants),
		credential:     newReply(fasthttp.StatusUnauthorized, codes.Unauthenticated, msgCredential),
		tenantClaim:    newReply(fasthttp.StatusForbidden, codes.PermissionDenied, msgTenantClaim),
		// 404, as an OTLP/HTTP receiver that does not serve a signal answers: a 4xx other than
		// 429 is not retried by OTLP exporters, and a retry would meet the same configuration.
		unserved: newReply(fasthttp.StatusNotFound, codes.Unimplemented, admission.MsgUnserved),
	}
}

// send writes r in encoding e.
func send(ctx *fasthttp.RequestCtx, e format, r *reply) {
	ctx.SetStatusCode(r.status)
	ctx.SetContentType(contentTypes[e])
	ctx.Response.SetBodyRaw(r.body[e])
}

// sendRetry writes r with a Retry-After header of d in whole seconds, as admission sizes it.
func sendRetry(ctx *fasthttp.RequestCtx, e format, r *reply, d time.Duration) {
	send(ctx, e, r)
	var buf [20]byte
	ctx.Response.Header.SetBytesV("Retry-After", strconv.AppendInt(buf[:0], admission.RetryAfterSeconds(d), 10))
}

// jsonEmpty is the JSON form of an empty Export*ServiceResponse; its protobuf form is empty.
var jsonEmpty = []byte("{}")

// sendOK writes the empty Export*ServiceResponse of a request accepted whole.
func sendOK(ctx *fasthttp.RequestCtx, e format) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[e])
	if e == encJSON {
		ctx.Response.SetBodyRaw(jsonEmpty)
	}
}

// sendPartial writes an Export*ServiceResponse whose partial_success reports rejected items and
// msg. It allocates, as the gRPC intake's answer does: it is the answer to a client sending
// broken data, not the steady state.
func sendPartial(ctx *fasthttp.RequestCtx, e format, sig fastpath.Signal, rejected int64, msg string) {
	var m proto.Message
	switch sig {
	case fastpath.Traces:
		m = &coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: msg}}
	case fastpath.Metrics:
		m = &colmetricsv1.ExportMetricsServiceResponse{PartialSuccess: &colmetricsv1.ExportMetricsPartialSuccess{RejectedDataPoints: rejected, ErrorMessage: msg}}
	default:
		m = &collogsv1.ExportLogsServiceResponse{PartialSuccess: &collogsv1.ExportLogsPartialSuccess{RejectedLogRecords: rejected, ErrorMessage: msg}}
	}
	var body []byte
	var err error
	if e == encJSON {
		body, err = protojson.Marshal(m)
	} else {
		body, err = proto.Marshal(m)
	}
	if err != nil {
		panic("BUG: httpserver: cannot marshal a response: " + err.Error())
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[e])
	ctx.Response.SetBodyRaw(body)
}

// sendStatus writes a google.rpc.Status made for this request (a transcoder's complaint).
func sendStatus(ctx *fasthttp.RequestCtx, e format, httpStatus int, code codes.Code, msg string) {
	send(ctx, e, newReply(httpStatus, code, msg))
}
