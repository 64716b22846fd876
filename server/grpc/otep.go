package grpcserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// resultOf maps a refusal reason to the OTEP result code.
func resultOf(reason admission.Reason) otepv1.ResultCode {
	switch reason {
	case admission.Accepted:
		return otepv1.ResultCode_Success
	case admission.Invalid, admission.TooLarge:
		return otepv1.ResultCode_FailedNoneRetryable
	}
	return otepv1.ResultCode_FailedRetryable
}

// peekID finds the id (field 1) of an OTEP request the scanner rejected, so that the
// FailedNoneRetryable answer still names the request: the first varint field 1 before the walk
// meets whatever was malformed. 0 when there is none to be found.
func peekID(b []byte) uint64 {
	for it := fastpath.NewTopLevel(b); ; {
		f, ok := it.Next()
		if !ok {
			return 0
		}
		if f.Num == 1 && f.Type == protowire.VarintType {
			return f.Varint
		}
	}
}

// otepUnary handles otlpgate.otep.v1.UnaryExporter for one signal.
func (s *Server) otepUnary(sig fastpath.Signal) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := s.authorize(ctx); err != nil {
			return nil, err
		}
		var hold admission.Hold
		if !s.takeRecv(ctx, &hold) {
			return nil, s.busy()
		}
		defer hold.Release()
		var raw codec.Raw
		if err := dec(&raw); err != nil {
			return nil, s.recvError(err)
		}
		defer raw.Release()
		req := raw.Bytes()
		sc, b, reason := s.admit(kindOTEPUnary, sig, req, fastpath.LayoutOTEP)
		id := sc.ID
		if reason == admission.Invalid {
			id = peekID(req)
		}
		// Admission copied the request: free the receive buffer and the reservation before
		// -ack=upstream waits for the upstream.
		raw.Release()
		hold.Release()
		if reason == admission.Accepted {
			reason = admission.Await(ctx, b)
		}
		if reason == admission.Full && s.overloaded() {
			ctr.overload[kindOTEPUnary].Inc()
			return nil, s.unavailable()
		}
		return &otepv1.ExportResponse{Id: id, ResultCode: resultOf(reason)}, nil
	}
}

// otepStream handles otlpgate.otep.v1.StreamExporter for one signal.
//
// Requests are read and admitted on the handler's goroutine. With -ack=accept the answer is
// sent at once, so answers leave in request order; with -ack=upstream each admitted request is
// answered by a waiter goroutine when its batch is delivered, up to StreamWindow at once, in
// whatever order batches complete.
//
// The stream ends (after every accepted request was answered) when the client closes its side,
// at StreamMaxAge or StreamMaxRequests (the client re-opens: re-balancing), under sustained
// overload (UNAVAILABLE with RetryInfo), or at shutdown. The age is checked as requests arrive:
// an idle stream past its age ends at its next request, which is still answered. At shutdown an
// idle stream ends at once, after the answers it owes (drain.go).
func (s *Server) otepStream(sig fastpath.Signal) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		if err := s.authorize(stream.Context()); err != nil {
			return err
		}
		st := &streamState{stream: stream}
		done := make(chan error, 1)
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			done <- s.otepStreamLoop(sig, st)
		}()
		select {
		case err := <-done:
			return err
		case <-s.drain:
		}
		if !st.gate.stopIdle() {
			return <-done // busy with a request: the loop answers it and ends the stream
		}
		st.wg.Wait() // the answers still owed (-ack=upstream)
		return nil
	}
}

// otepStreamLoop reads and admits the requests of one stream; it runs on a goroutine of its own.
func (s *Server) otepStreamLoop(sig fastpath.Signal, st *streamState) error {
	ctx := st.stream.Context()
	defer st.wg.Wait()
	var expired atomic.Bool
	if s.cfg.StreamMaxAge > 0 {
		t := time.AfterFunc(s.cfg.StreamMaxAge, func() { expired.Store(true) })
		defer t.Stop()
	}
	var window chan struct{}
	if s.p.Config().Ack == fastpath.AckUpstream {
		window = make(chan struct{}, s.cfg.StreamWindow)
	}
	var raw codec.Raw
	for n := int64(1); ; n++ {
		raw.Release()
		if err := s.recv(&st.gate, st.stream, &raw); err != nil {
			if errors.Is(err, io.EOF) || err == errDrained || err == errStopped {
				return st.finish(nil)
			}
			// A message the inflate budget had no room for ends the stream like overload:
			// the client sends what was not answered again, on a new stream, after the delay.
			return st.finish(s.recvError(err))
		}
		req := raw.Bytes()
		sc, b, reason := s.admit(kindOTEPStream, sig, req, fastpath.LayoutOTEP)
		id := sc.ID
		if reason == admission.Invalid {
			id = peekID(req)
		}
		if b != nil {
			window <- struct{}{}
			st.wg.Add(1)
			go func() {
				defer st.wg.Done()
				st.send(id, resultOf(admission.Await(ctx, b)))
				<-window
			}()
		} else if err := st.send(id, resultOf(reason)); err != nil {
			return st.finish(err)
		}
		switch {
		case reason == admission.Full && s.overloaded():
			ctr.overload[kindOTEPStream].Inc()
			return st.finish(s.unavailable())
		case s.draining.Load():
			// Shutdown began while this request was handled: the stream would wait for the
			// next one now, so it ends as an idle one does, and is counted the same.
			drainedStreams.Inc()
			return st.finish(nil)
		case s.cfg.StreamMaxRequests > 0 && n >= s.cfg.StreamMaxRequests:
			ctr.rebalanceReq.Inc()
			return st.finish(nil)
		case expired.Load():
			ctr.rebalanceAge.Inc()
			return st.finish(nil)
		}
	}
}

// streamState serialises the answers of one stream: gRPC allows one SendMsg at a time.
type streamState struct {
	stream grpc.ServerStream
	gate   recvGate
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		resp otepv1.ExportResponse
		err  error
	}
}

func (st *streamState) send(id uint64, code otepv1.ResultCode) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.err != nil {
		return st.mu.err
	}
	st.mu.resp.Id, st.mu.resp.ResultCode = id, code
	st.mu.err = st.stream.SendMsg(&st.mu.resp)
	return st.mu.err
}

// finish waits for the answers still owed and returns the stream's final status.
func (st *streamState) finish(err error) error {
	st.wg.Wait()
	return err
}
