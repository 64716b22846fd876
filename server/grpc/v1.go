package grpcserver

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
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

// v1Export handles opentelemetry.proto.collector.*.v1 Export for one signal.
func (s *Server) v1Export(sig fastpath.Signal) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := s.authorize(ctx); err != nil {
			return nil, err
		}
		var hold recvHold
		if !hold.take(ctx, s) {
			return nil, s.busy()
		}
		defer hold.release()
		var raw codec.Raw
		if err := dec(&raw); err != nil {
			return nil, err
		}
		defer raw.Release()
		req := raw.Bytes()
		_, b, reason := s.admit(kindV1, sig, req, fastpath.LayoutV1)
		var rejected int64
		var msg string
		if reason == refusedInvalid {
			// A request whose top level holds together may carry a few malformed resource
			// entries: keep the good ones and say which part was dropped.
			b, rejected, msg, reason = s.admitValidEntries(sig, req)
		}
		// Admission copied what it kept: the receive buffer and the reservation are free
		// before -ack=upstream waits for the upstream.
		raw.Release()
		hold.release()
		if reason == -1 {
			reason = await(ctx, b)
		}
		switch reason {
		case -1:
			return v1Response(sig, rejected, msg), nil
		case refusedInvalid:
			return nil, status.Error(codes.InvalidArgument, "malformed OTLP request")
		case refusedFull:
			if s.overloaded() {
				ctr.overload[kindV1].Inc()
			}
			return nil, s.unavailable()
		case refusedTooLarge:
			// Not retryable: without RetryInfo, RESOURCE_EXHAUSTED tells OTLP clients to drop it.
			return nil, status.Error(codes.ResourceExhausted, "request larger than the whole queue (-queue.max-bytes)")
		case refusedClosed:
			return nil, status.Error(codes.Unavailable, "otlpgate is shutting down")
		case refusedUpstream:
			return nil, s.unavailable()
		default:
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// admitValidEntries admits the resource entries of req that pass a full scan on their own, and
// reports how many items the others held (when they can be counted at all). reason is
// refusedInvalid when the top level is malformed or no entry is valid.
func (s *Server) admitValidEntries(sig fastpath.Signal, req []byte) (b *fastpath.Batch, rejected int64, msg string, reason int) {
	if s.cfg.ScanDepth != fastpath.DepthFull {
		return nil, 0, "", refusedInvalid
	}
	buf := pool.GetBytes(len(req))
	defer pool.PutBytes(buf)
	good, bad, items := 0, 0, 0
	it := fastpath.NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		field := req[f.Tag:f.End]
		if f.Num != 1 {
			// Not an entry: the pipeline strips it on admission and counts it
			// (otlpgate_fastpath_stripped_fields_total), as it does for every request.
			*buf = append(*buf, field...)
			continue
		}
		if sc, err := fastpath.ScanRequest(sig, field, fastpath.LayoutV1, fastpath.DepthFull); err == nil {
			*buf = append(*buf, field...)
			items += sc.Items
			good++
			continue
		}
		bad++
		if sc, err := fastpath.ScanRequest(sig, field, fastpath.LayoutV1, fastpath.DepthResource); err == nil {
			rejected += int64(sc.Items)
		}
	}
	if it.Err() != nil {
		return nil, 0, "", refusedInvalid
	}
	if good == 0 {
		return nil, 0, "", refusedInvalid
	}
	ctr.partial[sig].Add(float64(bad))
	b, err := s.p.Admit(sig, *buf, items, fastpath.LayoutV1)
	if err != nil {
		reason := reasonOf(err)
		ctr.refuse(kindV1, sig, reason, items)
		return nil, 0, "", reason
	}
	return b, rejected, fmt.Sprintf("%d of %d resource entries were malformed and dropped", bad, good+bad), -1
}
