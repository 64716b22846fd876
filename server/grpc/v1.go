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
		v := s.admitV1(received(from, sig, raw))
		// Admission copied what it kept: the receive buffer and the reservation are free
		// before -ack=upstream waits for the upstream.
		raw.Release()
		hold.Release()
		if v.reason == admission.Accepted {
			v.reason = ctr.await(ctx, kindV1, sig, v.b, v.items)
		}
		if v.reason == admission.Accepted {
			return v1Response(sig, v.rejected, v.msg), nil
		}
		return nil, s.v1Error(ctx, v.reason, v.wait)
	}
}

// v1Verdict is what admission decided for one v1 request.
type v1Verdict struct {
	b        *pipeline.Batch // the batch to await (-ack=upstream), when accepted
	items    int             // the items admitted
	rejected int64           // the items of malformed entries dropped (partial success)
	msg      string          // the partial success's message; empty: a full success
	reason   admission.Reason
	wait     time.Duration // the delay a Throttled request is told
}

// admitV1 is the step both transports take once a v1 request r (Origin and Body set, and
// what it arrived as: Wire, Encoding, Own) was received: scan it and admit it, or, when its
// scan fails, admit its valid resource entries. r.Body must not be read after it returns.
func (s *Server) admitV1(r pipeline.Request) (v v1Verdict) {
	// req is read below only when admission refused it, which leaves it in place.
	req := r.Body
	sc, err := s.scan(kindV1, r.Signal, req, fastpath.LayoutV1)
	v.items = max(sc.Items, 0)
	if err == nil {
		v.b, v.reason = s.admitScanned(kindV1, r, sc)
	} else {
		// A request whose top level holds together may carry a few malformed resource
		// entries: keep the good ones and say which part was dropped. It is counted once
		// that is known: received with the items kept, or refused as invalid.
		v.b, v.items, v.rejected, v.msg, v.reason = s.admitValidEntries(r.Origin, r.Signal, req)
	}
	if v.reason == admission.Throttled {
		v.wait = admission.TenantDelay(r.Origin.Tenant, req, max(sc.Items, 0))
	}
	return v
}

// v1Error is the status a v1 call ends with when its request was not accepted for reason;
// wait is the delay of a Throttled one. Both transports answer with it.
func (s *Server) v1Error(ctx context.Context, reason admission.Reason, wait time.Duration) error {
	switch reason {
	case admission.Invalid:
		return status.Error(codes.InvalidArgument, "malformed OTLP request")
	case admission.Full, admission.SpoolFull, admission.SpoolIO:
		if s.overloaded() {
			ctr.overload[kindV1].Inc()
		}
		return s.unavailable(msgOverloaded)
	case admission.TooLarge:
		// Not retryable: without RetryInfo, RESOURCE_EXHAUSTED tells OTLP clients to drop it.
		return status.Error(codes.ResourceExhausted, "request larger than the whole queue (-queue.max-bytes)")
	case admission.Closed:
		return status.Error(codes.Unavailable, "otlpgate is shutting down")
	case admission.Upstream:
		return s.unavailable(msgUpstream)
	case admission.Throttled:
		return throttled(wait)
	case admission.Unserved:
		// UNIMPLEMENTED, as a server that does not serve a signal answers: OTLP exporters
		// do not retry it, and a retry would meet the same configuration.
		return status.Error(codes.Unimplemented, admission.MsgUnserved)
	case admission.Busy:
		// The intake limiter had no room for what processing writes: as any of its
		// refusals, retried after its wait.
		return s.busy()
	default:
		return status.FromContextError(ctx.Err()).Err()
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
