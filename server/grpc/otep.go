package grpcserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// resultOf maps a refusal reason to the OTEP result code.
func resultOf(reason admission.Reason) otepv1.ResultCode {
	switch reason {
	case admission.Accepted:
		return otepv1.ResultCode_Success
	case admission.Invalid, admission.TooLarge, admission.Unserved:
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

// admitOTEP scans and admits req, an OTEP request of a unary call or of a stream from o, and
// returns with the outcome what its answer names: the request's id (found in its bytes when
// the scan refused it, peekID) and, when it was refused for its tenant's rate (-tenant.rate),
// the tenant's wait in milliseconds.
func (s *Server) admitOTEP(k kind, o pipeline.Origin, sig fastpath.Signal, req []byte) (sc fastpath.Scan, b *pipeline.Batch, reason admission.Reason, id, delay uint64) {
	sc, b, reason = s.admit(k, o, sig, req, fastpath.LayoutOTEP)
	id = sc.ID
	if reason == admission.Invalid {
		id = peekID(req)
	}
	if reason == admission.Throttled {
		delay = retryDelayMs(admission.TenantDelay(o.Tenant, req, sc.Items))
	}
	return sc, b, reason, id, delay
}

// otepUnary handles otlpgate.otep.v1.UnaryExporter for one signal.
func (s *Server) otepUnary(sig fastpath.Signal) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var hold admission.Hold
		defer hold.Release()
		var raw codec.Raw
		defer raw.Release()
		from, err := s.receive(ctx, dec, &hold, &raw)
		if err != nil {
			return nil, err
		}
		v := s.admitOTEPUnary(from, sig, raw.Bytes())
		// Admission copied the request: free the receive buffer and the reservation before
		// -ack=upstream waits for the upstream.
		raw.Release()
		hold.Release()
		if v.reason == admission.Accepted {
			v.reason = ctr.await(ctx, kindOTEPUnary, sig, v.b, v.items)
		}
		return s.otepUnaryAnswer(v)
	}
}

// otepVerdict is what admission decided for one OTEP unary request.
type otepVerdict struct {
	b         *pipeline.Batch // the batch to await (-ack=upstream), when accepted
	items     int
	reason    admission.Reason
	id, delay uint64 // the answer's id and retry_delay_ms
}

// admitOTEPUnary is the step both transports take once an OTEP unary request req was
// received from o: scan and admit it.
func (s *Server) admitOTEPUnary(o pipeline.Origin, sig fastpath.Signal, req []byte) otepVerdict {
	sc, b, reason, id, delay := s.admitOTEP(kindOTEPUnary, o, sig, req)
	return otepVerdict{b: b, items: max(sc.Items, 0), reason: reason, id: id, delay: delay}
}

// otepUnaryAnswer is the answer of an OTEP unary call once admission (and, with -ack=upstream,
// the upstream) decided: a result code, or UNAVAILABLE with RetryInfo under sustained overload.
func (s *Server) otepUnaryAnswer(v otepVerdict) (*otepv1.ExportResponse, error) {
	if v.reason == admission.Busy {
		v.delay = retryDelayMs(s.adm.BusyDelay())
	}
	if v.reason.Backpressure() && s.overloaded() {
		ctr.overload[kindOTEPUnary].Inc()
		return nil, s.unavailable(msgOverloaded)
	}
	return &otepv1.ExportResponse{Id: v.id, ResultCode: resultOf(v.reason), RetryDelayMs: v.delay}, nil
}

// otepStream handles otlpgate.otep.v1.StreamExporter for one signal.
//
// Requests are read and admitted on a loop goroutine of the stream's own. With -ack=accept the
// loop answers each at once, so answers leave in request order; with -ack=upstream each
// admitted request waits for its batch on a waiter goroutine, up to StreamWindow at once, and
// one sender goroutine sends the answers in whatever order batches complete.
//
// The stream ends (after every accepted request was answered) when the client closes its side,
// at StreamMaxAge or StreamMaxRequests (the client re-opens: re-balancing), under sustained
// overload (UNAVAILABLE with RetryInfo), or at shutdown. StreamMaxAge ends an idle stream too,
// at once; a stream busy with a request ends once it answered it. At shutdown an idle stream
// ends at once, after the answers it owes (drain.go).
//
// Answers the client does not take are bounded (answers.go): with StreamMaxUnsent of them
// waiting, the stream stops reading; when none is taken within StreamAnswerTimeout the
// connection is closed.
func (s *Server) otepStream(sig fastpath.Signal) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		ctx := stream.Context()
		from, err := s.caller(ctx)
		if err != nil {
			return err
		}
		// Answers are a few bytes: compressing them saves nothing, and a compressed copy would
		// be queued in place of the answer slot and escape the count of unsent answers.
		_ = grpc.SetSendCompressor(ctx, encoding.Identity)
		st := s.newStreamState(stream)
		st.from = from
		done := make(chan error, 1)
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			done <- s.otepStreamLoop(sig, st)
		}()
		var age <-chan time.Time
		if s.cfg.StreamMaxAge > 0 {
			t := time.NewTimer(s.cfg.StreamMaxAge)
			defer t.Stop()
			age = t.C
		}
		for {
			select {
			case err := <-done:
				return err
			case <-s.drain:
				if !st.gate.stopIdle() {
					return <-done // busy with a request: the loop answers it and ends the stream
				}
				drainedStreams.Inc()
			case <-age:
				// Stored before the gate is tried, and read by the loop after it moved to
				// receiving: as for draining (drain.go), an idle loop cannot miss it.
				st.expired.Store(true)
				if !st.gate.stopIdle() {
					age = nil // busy with a request: the loop ends the stream after answering it
					continue
				}
				ctr.rebalanceAge.Inc()
			}
			return st.finish(nil) // the answers still owed (-ack=upstream)
		}
	}
}

// otepStreamLoop reads and admits the requests of one stream; it runs on a goroutine of its own.
func (s *Server) otepStreamLoop(sig fastpath.Signal, st *streamState) error {
	var raw codec.Raw
	defer raw.Release()
	for n := int64(1); ; n++ {
		raw.Release()
		if err := s.recv(st, &raw); err != nil {
			switch {
			case err == errExpired:
				ctr.rebalanceAge.Inc()
				return st.finish(nil)
			case errors.Is(err, io.EOF) || err == errDrained || err == errStopped:
				return st.finish(nil)
			}
			// A message the inflate budget had no room for ends the stream like overload:
			// the client sends what was not answered again, on a new stream, after the delay.
			return st.finish(s.recvError(err))
		}
		if st.from.Tenant.Expired() {
			// The stream was quiet longer than -intake.tenant-idle: its tenant left the table.
			// Looked up again it is interned anew (a refusal, the table being full, keeps the
			// old one: its requests are still delivered, under its forwarded header).
			if o, err := s.origin(st.ctx); err == nil {
				st.from = o
			}
		}
		// Refused for its tenant's rate: FailedRetryable with the tenant's wait; the stream goes
		// on: the other requests on it may fit, and another tenant's streams are not concerned.
		sc, b, reason, id, delay := s.admitOTEP(kindOTEPStream, st.from, sig, raw.Bytes())
		if reason == admission.Busy {
			delay = retryDelayMs(s.adm.BusyDelay())
		}
		if err := st.answer(id, b, reason, delay, sig, max(sc.Items, 0)); err != nil {
			return st.finish(err)
		}
		switch {
		case reason.Backpressure() && s.overloaded():
			ctr.overload[kindOTEPStream].Inc()
			return st.finish(s.unavailable(msgOverloaded))
		case s.draining.Load():
			// Shutdown began while this request was handled: the stream would wait for the
			// next one now, so it ends as an idle one does, and is counted the same.
			drainedStreams.Inc()
			return st.finish(nil)
		case s.cfg.StreamMaxRequests > 0 && n >= s.cfg.StreamMaxRequests:
			ctr.rebalanceReq.Inc()
			return st.finish(nil)
		case st.expired.Load():
			ctr.rebalanceAge.Inc()
			return st.finish(nil)
		}
	}
}

// streamState is one OTEP stream. Its answers are sent by one goroutine: the loop with
// -ack=accept, the sender with -ack=upstream (gRPC allows one SendMsg at a time).
type streamState struct {
	s       *Server
	stream  grpc.ServerStream
	ctx     context.Context
	conn    *conn // the stream's connection, closed when answers are not taken; nil if unknown
	gate    recvGate
	expired atomic.Bool     // StreamMaxAge passed
	from    pipeline.Origin // the stream's tenant (-intake.headers; nil without tenants) and client address

	// Owned by the sending goroutine.
	ring answerRing
	resp otepv1.ExportResponse
	err  error // the first send failure: nothing more is sent

	// -ack=upstream only.
	window  chan struct{} // a token per request admitted and not yet answered
	queue   chan answer   // answers for the sender, in the order their batches completed
	waiters sync.WaitGroup
	sent    chan struct{} // closed when the sender returned
	closeQ  sync.Once
	failed  atomic.Pointer[error] // the sender's failure: the loop stops
}

type answer struct {
	id    uint64
	code  otepv1.ResultCode
	delay uint64 // retry_delay_ms
	// drop: not sent, only its slot of the window given back (a wait the stream's deadline
	// cut short).
	drop bool
}

func (s *Server) newStreamState(stream grpc.ServerStream) *streamState {
	ctx := stream.Context()
	st := &streamState{s: s, stream: stream, ctx: ctx, conn: s.conns.of(ctx)}
	st.ring.init(s.cfg.StreamMaxUnsent)
	if s.adm.AckUpstream() {
		st.window = make(chan struct{}, s.cfg.StreamWindow)
		st.queue = make(chan answer, s.cfg.StreamWindow)
		st.sent = make(chan struct{})
		s.loops.Add(1)
		go st.sendLoop()
	}
	return st
}

// answer answers request id, refused for reason (with delay, the retry_delay_ms of a
// throttled one) or admitted into b (-ack=upstream: answered once b is delivered; sig and
// items are what a request b did not deliver is counted under). With -ack=upstream it waits
// while StreamWindow requests are unanswered. Called by the loop only.
func (st *streamState) answer(id uint64, b *pipeline.Batch, reason admission.Reason, delay uint64, sig fastpath.Signal, items int) error {
	if st.queue == nil {
		return st.send(id, resultOf(reason), delay)
	}
	// On a refusal here b, already admitted, is delivered unanswered (the client sends its
	// request again): only the caller's reference to it is dropped.
	if err := st.failed.Load(); err != nil {
		unref(b)
		return *err
	}
	select {
	case st.window <- struct{}{}:
	case <-st.ctx.Done():
		unref(b)
		return status.FromContextError(st.ctx.Err()).Err()
	}
	// The sender gives its slot of the window back after a failed send too: a loop let in by
	// it must not read on from a stream that is over.
	if err := st.failed.Load(); err != nil {
		<-st.window
		unref(b)
		return *err
	}
	if b == nil {
		st.queue <- answer{id, resultOf(reason), delay, false} // never blocks: it has room for the window
		return nil
	}
	st.waiters.Add(1)
	go func() {
		defer st.waiters.Done()
		reason := ctr.await(st.ctx, kindOTEPStream, sig, b, items)
		// A wait the stream's grpc-timeout cut short is not answered: the stream ends with
		// DEADLINE_EXCEEDED, as on the own transport, whose trailers at the deadline come
		// before any such answer; sent, it would race grpc-go's own end of the stream.
		drop := reason == admission.Timeout && errors.Is(st.ctx.Err(), context.DeadlineExceeded)
		st.queue <- answer{id, resultOf(reason), 0, drop}
	}()
	return nil
}

// unref drops the reference to b, if any, that admission returned it with.
func unref(b *pipeline.Batch) {
	if b != nil {
		b.Unref()
	}
}

// sendLoop sends the answers of an -ack=upstream stream until finish closes the queue.
func (st *streamState) sendLoop() {
	defer st.s.loops.Done()
	defer close(st.sent)
	for a := range st.queue {
		if a.drop {
			<-st.window
			continue
		}
		if err := st.send(a.id, a.code, a.delay); err != nil && st.failed.Load() == nil {
			st.failed.Store(&err)
		}
		<-st.window
	}
}

// send sends one answer from a slot of the ring, waiting up to StreamAnswerTimeout for one.
// Sending goroutine only.
func (st *streamState) send(id uint64, code otepv1.ResultCode, delay uint64) error {
	if st.err != nil {
		return st.err
	}
	a := st.ring.take(st.s.cfg.StreamAnswerTimeout, st.ctx.Done())
	if a == nil {
		if err := st.ctx.Err(); err != nil {
			st.err = status.FromContextError(err).Err()
			return st.err
		}
		// None of StreamMaxUnsent answers was taken in time. gRPC keeps them (and any other
		// stream's) until the connection ends: end it.
		if st.conn != nil {
			st.conn.kill(closeAnswers)
		}
		st.err = errAnswersNotTaken
		return st.err
	}
	st.resp.Id, st.resp.ResultCode, st.resp.RetryDelayMs = id, code, delay
	a.fill(&st.resp)
	if err := st.stream.SendMsg(a); err != nil {
		st.err = err
	}
	return st.err
}

// finish waits for the answers still owed and returns the stream's final status. Called by the
// loop before it returns, and by the handler when it ends an idle stream.
func (st *streamState) finish(err error) error {
	if st.queue != nil {
		st.waiters.Wait()
		st.closeQ.Do(func() { close(st.queue) })
		<-st.sent
	}
	return err
}
