package grpcserver

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// Empty responses are shared: marshalling only reads them.
var (
	emptyTraceResp   = &coltracev1.ExportTraceServiceResponse{}
	emptyMetricsResp = &colmetricsv1.ExportMetricsServiceResponse{}
	emptyLogsResp    = &collogsv1.ExportLogsServiceResponse{}
)

func v1Response(sig fastpath.Signal, rejected int64, msg string) any {
	if msg == "" {
		switch sig {
		case fastpath.Traces:
			return emptyTraceResp
		case fastpath.Metrics:
			return emptyMetricsResp
		default:
			return emptyLogsResp
		}
	}
	switch sig {
	case fastpath.Traces:
		return &coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: msg}}
	case fastpath.Metrics:
		return &colmetricsv1.ExportMetricsServiceResponse{PartialSuccess: &colmetricsv1.ExportMetricsPartialSuccess{RejectedDataPoints: rejected, ErrorMessage: msg}}
	default:
		return &collogsv1.ExportLogsServiceResponse{PartialSuccess: &collogsv1.ExportLogsPartialSuccess{RejectedLogRecords: rejected, ErrorMessage: msg}}
	}
}

// raws recycles the Raw each v1 call receives its request into: dec takes a pointer, so a Raw
// declared in the handler would be allocated on every call. The free list keeps them through
// collections (a sync.Pool makes them again after each one), one per call in progress.
var raws = pool.NewFreeList[codec.Raw](maxFreeRaws, nil)

const maxFreeRaws = 1024

func getRaw() *codec.Raw { return raws.Get() }

// putRaw releases what r holds and recycles it.
func putRaw(r *codec.Raw) {
	r.Release()
	raws.Put(r)
}

// received is the v1 request raw holds, from o: besides its bytes, the compressed bytes it
// arrived as (a WireDecompressor kept them), which may join a batch as they are, or else the
// buffer of raw's own a message that arrived in several frames was copied into, which a batch
// the request opens may take over instead of copying it (pipeline.Request.Own). The request
// must not be read after an admission; a refusal leaves it as it was.
func received(o pipeline.Origin, sig fastpath.Signal, raw *codec.Raw) pipeline.Request {
	req := pipeline.Request{Signal: sig, Origin: o, Body: raw.Bytes()}
	switch wire, enc := raw.Wire(); enc {
	case codec.Gzip:
		req.Wire, req.Encoding = wire, pipeline.EncodingGzip
	case codec.Zstd:
		req.Wire, req.Encoding = wire, pipeline.EncodingZstd
	default:
		req.Own = raw.Owned()
	}
	return req
}

// v1Export handles opentelemetry.proto.collector.*.v1 Export for one signal.
func (s *Server) v1Export(sig fastpath.Signal) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var hold admission.Hold
		defer hold.Release()
		raw := getRaw()
		defer putRaw(raw)
		from, err := s.receive(ctx, dec, &hold, raw)
		if err != nil {
			return nil, err
		}
		r := received(from, sig, raw)
		// req is read below only when admission refused it, which leaves it in place.
		req := r.Body
		var b *pipeline.Batch
		var reason admission.Reason
		var rejected int64
		var msg string
		sc, err := s.scan(kindV1, sig, req, fastpath.LayoutV1)
		items := max(sc.Items, 0)
		if err == nil {
			b, reason = s.admitScanned(kindV1, r, sc)
		} else {
			// A request whose top level holds together may carry a few malformed resource
			// entries: keep the good ones and say which part was dropped. It is counted once
			// that is known: received with the items kept, or refused as invalid.
			b, items, rejected, msg, reason = s.admitValidEntries(from, sig, req)
		}
		var wait time.Duration
		if reason == admission.Throttled {
			wait = admission.TenantDelay(from.Tenant, req, max(sc.Items, 0))
		}
		// Admission copied what it kept: the receive buffer and the reservation are free
		// before -ack=upstream waits for the upstream.
		raw.Release()
		hold.Release()
		if reason == admission.Accepted {
			reason = ctr.await(ctx, kindV1, sig, b, items)
		}
		switch reason {
		case admission.Accepted:
			return v1Response(sig, rejected, msg), nil
		case admission.Invalid:
			return nil, status.Error(codes.InvalidArgument, "malformed OTLP request")
		case admission.Full, admission.SpoolFull, admission.SpoolIO:
			if s.overloaded() {
				ctr.overload[kindV1].Inc()
			}
			return nil, s.unavailable(msgOverloaded)
		case admission.TooLarge:
			// Not retryable: without RetryInfo, RESOURCE_EXHAUSTED tells OTLP clients to drop it.
			return nil, status.Error(codes.ResourceExhausted, "request larger than the whole queue (-queue.max-bytes)")
		case admission.Closed:
			return nil, status.Error(codes.Unavailable, "otlpgate is shutting down")
		case admission.Upstream:
			return nil, s.unavailable(msgUpstream)
		case admission.Throttled:
			return nil, throttled(wait)
		case admission.Unserved:
			// UNIMPLEMENTED, as a server that does not serve a signal answers: OTLP exporters
			// do not retry it, and a retry would meet the same configuration.
			return nil, status.Error(codes.Unimplemented, admission.MsgUnserved)
		case admission.Busy:
			// The intake limiter had no room for what processing writes: as any of its
			// refusals, retried after its wait.
			return nil, s.busy()
		default:
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// admitValidEntries admits the resource entries of the v1 request req, which failed its scan,
// that pass a full scan on their own, and reports how many items the admitted entries hold and
// how many the others held (when they can be counted at all). It counts the request as the
// OTLP/HTTP intake does: received with the items kept, the dropped entries as partially
// rejected; refused as invalid (once, with no items) when the top level is malformed or no
// entry is valid.
func (s *Server) admitValidEntries(o pipeline.Origin, sig fastpath.Signal, req []byte) (b *pipeline.Batch, items int, rejected int64, msg string, reason admission.Reason) {
	if s.cfg.ScanDepth != fastpath.DepthFull {
		ctr.refuse(kindV1, sig, admission.Invalid, 0)
		return nil, 0, 0, "", admission.Invalid
	}
	buf := pool.GetBytes(len(req))
	defer pool.PutBytes(buf)
	var e fastpath.Entries
	var err error
	if *buf, e, err = fastpath.AppendValidEntries(*buf, sig, req); err != nil || e.Good == 0 {
		ctr.refuse(kindV1, sig, admission.Invalid, 0)
		return nil, 0, 0, "", admission.Invalid
	}
	ctr.partial[sig].Add(float64(e.Bad))
	// The kept entries are a request that passes its scan: admitted from buf (admission
	// copies it), counted received, or refused with their items.
	sc := fastpath.Scan{Resources: e.Good, Items: e.Items}
	if b, reason = s.admitScanned(kindV1, pipeline.Request{Signal: sig, Origin: o, Body: *buf}, sc); reason != admission.Accepted {
		return nil, 0, 0, "", reason
	}
	return b, e.Items, e.Rejected, fmt.Sprintf("%d of %d resource entries were malformed and dropped", e.Bad, e.Good+e.Bad), admission.Accepted
}
