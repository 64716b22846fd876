package grpcserver

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// takeRecv reserves, in h, the intake limiter's bytes for one message being received and
// admitted, waiting up to -intake.wait or until the call ends; false when the limiter refused.
//
// grpc-go reads a unary request inside the handler's dec call (RecvMsg), not before the
// handler runs, and once it read the message's length it lets the whole message in: the
// reservation is taken before the message is read. While a call waits for it, gRPC keeps at
// most the stream's flow-control window of that call's bytes (-grpc.http2.stream-window), and
// the client is held back by flow control. The message size is not known before it is read, so
// a call reserves the largest (-grpc.max-recv-msg-size), from its connection's account
// (-intake.max-conn-bytes, connbudget.go) and the budget of -intake.max-bytes; the inflated
// copy of a compressed message takes its bytes from the inflate budget before it is produced
// (InflateBudget). The reservation is given back as soon as admission copied the message,
// before an -ack=upstream call waits for its upstream.
func (s *Server) takeRecv(ctx context.Context, h *admission.Hold) bool {
	n := int64(s.cfg.MaxRecvMsgSize)
	if p, ok := peer.FromContext(ctx); ok {
		if a := accountOf(p); a != nil {
			return s.adm.TakeFrom(h, a, n, ctx.Done())
		}
	}
	return s.adm.Take(h, admission.IntakeGRPC, n, ctx.Done())
}

// caller is where every call starts, a unary call (receive) as an OTEP stream (otepStream):
// it authorizes the call and reads its tenant and client address. On an error the call is
// answered with it.
func (s *Server) caller(ctx context.Context) (pipeline.Origin, error) {
	if err := s.authorize(ctx); err != nil {
		return pipeline.Origin{}, err
	}
	return s.origin(ctx)
}

// receive is the step every unary handler starts with: the caller's step (authorization,
// tenant and client address), then it reserves the message's bytes in hold (takeRecv) and
// decodes the message into raw. On an error the call is answered with it. The caller releases
// hold and raw (a zero Hold and an empty Raw release nothing), as soon as admission copied the
// message. An OTEP stream takes the caller's step once, and reads each of its messages through
// its gate (recv, drain.go).
func (s *Server) receive(ctx context.Context, dec func(any) error, hold *admission.Hold, raw *codec.Raw) (pipeline.Origin, error) {
	from, err := s.caller(ctx)
	if err != nil {
		return pipeline.Origin{}, err
	}
	if !s.takeRecv(ctx, hold) {
		return pipeline.Origin{}, s.busy()
	}
	if err := dec(raw); err != nil {
		return pipeline.Origin{}, s.recvError(err)
	}
	return from, nil
}

// busy is the answer to a call the intake limiter refused: RESOURCE_EXHAUSTED with RetryInfo
// set to the limiter's wait, which OTLP clients retry after the delay.
func (s *Server) busy() error {
	st := status.New(codes.ResourceExhausted, "otlpgate intake is busy (-intake.max-bytes): retry after the given delay")
	if d, err := st.WithDetails(retryInfo(s.adm.BusyDelay())); err == nil {
		st = d
	}
	return st.Err()
}

// recvError is what a call answers when receiving its message failed with err: the inflate
// budget's refusal (after inflateWait) as busy, anything else as gRPC reported it. A unary
// call's client still sees the INTERNAL status gRPC wrote when the receive failed; an OTEP
// stream ends with this one.
func (s *Server) recvError(err error) error {
	if codec.IsInflateBudget(err) {
		return s.busy()
	}
	return err
}

// InflateBudget returns the codec.Budget the gRPC decompressors inflate into: the intake
// limiter's inflate budget (-intake.inflate-bytes), from which each message past
// codec.FreeInflate claims -grpc.max-recv-msg-size before it inflates. It is separate from the
// budget the calls' reservations come from: a call holds its reservation (for the compressed
// message) while its message inflates, and calls waiting in one budget for bytes the others
// hold could wait on one another. A decompression waits for its claim up to inflateWait, not
// -intake.wait: the claims ahead of it are released as soon as their messages are inflated,
// and gRPC would answer a refusal INTERNAL, which OTLP clients drop rather than retry. cmd/
// registers the compressors with it (codec.RegisterCompressorsWith), which also covers the
// replies the upstream clients decompress, past codec.FreeInflate.
func InflateBudget(lim *admission.Limiter) codec.Budget { return inflateBudget{lim} }

// inflateWait bounds a decompression's wait for its claim; it is only reached if claims were
// not given back, which would be a bug.
const inflateWait = 30 * time.Second

type inflateBudget struct{ lim *admission.Limiter }

func (b inflateBudget) Acquire(n int) bool {
	return b.lim.AcquireInflate(admission.IntakeGRPC, int64(n), inflateWait, nil)
}

func (b inflateBudget) Release(n int) { b.lim.ReleaseInflate(int64(n)) }
