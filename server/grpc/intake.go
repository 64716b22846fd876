package grpcserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// takeRecv reserves, in h, the intake limiter's bytes for one message being received and
// admitted, waiting up to -intake.wait or until the call ends; false when the limiter refused.
//
// grpc-go reads a unary request inside the handler's dec call (RecvMsg), not before the
// handler runs, so the reservation is taken before the message is read: while a call waits
// for it, gRPC keeps at most the stream's flow-control window of that call's bytes
// (-grpc.http2.stream-window), and the client is held back by flow control. The message size
// is not known before it is read, so a call reserves the largest (-grpc.max-recv-msg-size):
// -intake.max-bytes / -grpc.max-recv-msg-size calls are received at once, the others wait up to
// -intake.wait. The reservation is given back as soon as admission copied the message, before
// an -ack=upstream call waits for its upstream.
func (s *Server) takeRecv(ctx context.Context, h *admission.Hold) bool {
	return s.adm.Take(h, fastpath.IntakeGRPC, int64(s.cfg.MaxRecvMsgSize), ctx.Done())
}

// busy is the answer to a call the intake limiter refused: UNAVAILABLE with RetryInfo, as for
// a full queue, with the limiter's wait as the delay.
func (s *Server) busy() error {
	st := status.New(codes.Unavailable, "otlpgate intake is busy (-intake.max-bytes): retry after the given delay")
	if d, err := st.WithDetails(retryInfo(s.adm.BusyDelay())); err == nil {
		st = d
	}
	return st.Err()
}
