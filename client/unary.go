package client

import (
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Unary mode: Concurrency workers per signal, each with one call in flight; the next call
// starts only after the previous one was answered or failed. The ack timeout runs from when
// the transport took the request (SendMsg returned) to the answer: waiting for a connection,
// for a stream the server allows, or for flow-control window before that is not the upstream's
// answer time. A call past it is cancelled and retried after the backoff.

// unaryDesc describes a unary call to NewStream, as Invoke does.
var unaryDesc = grpc.StreamDesc{}

var errAckTimeout = errors.New("client: no answer within the ack timeout")

// worker is one unary sender, for one signal: Concurrency of them per signal, so that calls of
// a signal whose upstream stops answering occupy that signal's workers only. Its fields belong
// to its goroutine, but for ack, which the ack timer's goroutine shares.
type worker struct {
	d     *Dest
	sig   fastpath.Signal
	timer *time.Timer
	raw   codec.Raw // v1 request: the payload, by reference
	reply codec.Raw // v1 response, read for its partial success only
	resp  otepv1.ExportResponse

	// ctx is the context of every call of the worker (callctx.go): a call makes none.
	ctx     *callContext
	release func() bool // stops ctx following the destination's context

	// ack is the ack timeout of the call under way: one timer for the worker's life, so that a
	// call allocates no closure for it. fired has a token once its function has cancelled a
	// call; the worker takes it before the call ends, so that a late firing can never reach the
	// next call.
	ack struct {
		timer *time.Timer
		fired chan struct{}
	}
}

func newWorker(d *Dest, sig fastpath.Signal) *worker {
	w := &worker{d: d, sig: sig, timer: stoppedTimer()}
	w.ctx, w.release = newCallContext(d.ctx)
	w.ack.fired = make(chan struct{}, 1)
	w.ack.timer = time.AfterFunc(time.Hour, w.ackTimedOut)
	w.ack.timer.Stop()
	return w
}

// ackTimedOut runs on the timer's goroutine when a call's answer is overdue. The timer is
// armed only while a call waits for its answer, and the call does not end before this has
// returned (awaitAnswer), so it cancels that call and no other.
func (w *worker) ackTimedOut() {
	w.ctx.cancel(errAckTimeout)
	w.ack.fired <- struct{}{}
}

// awaitAnswer reads the answer of cs into reply, cancelling the call if it does not come
// within AckTimeout.
func (w *worker) awaitAnswer(cs grpc.ClientStream, reply any) error {
	w.ack.timer.Reset(w.d.cfg.AckTimeout)
	err := cs.RecvMsg(reply)
	if !w.ack.timer.Stop() {
		<-w.ack.fired // its function started: wait until it is done with this call
	}
	return err
}

func (w *worker) run() {
	defer w.d.wg.Done()
	defer w.ack.timer.Stop()
	defer w.release()
	for {
		r := w.d.next(w.sig, w.timer)
		if r == nil {
			return
		}
		w.call(r)
	}
}

func (w *worker) call(r *request) {
	d := w.d
	if r.sig >= fastpath.NumSignals {
		d.drop(r, DropInvalid)
		return
	}
	if !d.waitPause(w.timer) { // a throttle may have come since next returned r
		d.lose(r)
		return
	}
	if !d.sendsAsIs(r.b) {
		d.drop(r, DropInvalid)
		return
	}
	var msg, reply any
	var f *frame
	if d.cfg.Protocol == ProtocolOTEP {
		var err error
		if f, err = newFrame(r.id, r.b.Payload); err != nil {
			d.drop(r, DropInvalid)
			return
		}
		if f.size > d.cfg.MaxSendMsgSize {
			f.unref()
			d.drop(r, DropTooLarge)
			return
		}
		msg, reply = f, &w.resp
	} else {
		// The upstream checks the decompressed message against its limit; a pass-through
		// batch goes compressed as it is (codec/passthrough.go).
		if r.b.PlainLen() > d.cfg.MaxSendMsgSize {
			d.drop(r, DropTooLarge)
			return
		}
		w.raw.SetPayload(r.b.Payload.Retain())
		msg, reply = &w.raw, &w.reply
	}
	r.attempt++
	d.sending.Add(1)
	d.m.sentRequests.Inc()
	d.m.sentBytes.Add(float64(r.b.PlainLen())) // before compression, a pass-through batch's too

	// What ClientConn.Invoke does, with the ack timeout armed between the send and the answer.
	// Every path that opened the stream ends in RecvMsg, which ends it: the call's context is
	// never cancelled merely because the call is over (callctx.go). Its values (the outgoing
	// metadata) are the batch's tenant's with forward-headers (forward.go).
	w.ctx.use(d.callCtx(r.b.Tenant))
	w.ctx.begin()
	var tooLarge bool // the upstream answered, over max-recv-msg-size (answer.go)
	cs, err := d.conn.NewStream(w.ctx, &unaryDesc, d.methods[r.sig], d.unaryOpts...)
	if err == nil {
		// io.EOF: the stream ended before the request went; its status comes from RecvMsg.
		if err = cs.SendMsg(msg); err == nil || err == io.EOF {
			r.sentAt = nanotime()
			err = w.awaitAnswer(cs, reply)
			tooLarge = err != nil && d.answerOverLimit(cs, err)
		}
	}
	timedOut := w.ctx.end() == errAckTimeout
	if f != nil {
		f.unref()
	}
	w.raw.Release()
	d.sending.Add(-1)

	if err == nil || tooLarge {
		if tooLarge {
			d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
			w.reply.Release()
			d.unreadableAnswer(r, status.Convert(err).Message())
			return
		}
		if f != nil {
			d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
			if w.resp.Id != r.id {
				d.m.unknownAcks.Inc() // one call, one answer: it is ours whatever id it names
			}
			d.result(r, w.resp.ResultCode, w.resp.RetryDelayMs)
			return
		}
		d.unaryAnswered(r, w.reply.Bytes())
		w.reply.Release()
		return
	}
	w.reply.Release()
	d.unaryFailed(r, err, timedOut)
}

// unaryAnswered finishes r, whose v1 Export call succeeded with reply (the ExportResponse's
// bytes, read for its partial success), whichever transport made the call.
func (d *Dest) unaryAnswered(r *request, reply []byte) {
	d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
	d.partial(r, reply)
	d.deliver(r)
}

// unaryFailed decides what becomes of r, whose unary call failed with err (a gRPC status, or
// a transport error), or whose answer did not come within the ack timeout: one set of rules
// for every transport, so that grpc-go and otlpgate's own treat an upstream alike.
func (d *Dest) unaryFailed(r *request, err error, timedOut bool) {
	if timedOut {
		d.noteError(errAckTimeout)
	} else {
		d.noteError(err)
	}
	switch v, delay := classify(err, false); {
	case d.stopping() && d.handback.Load() != nil:
		d.lose(r)
	case d.stopping():
		d.drop(r, DropShutdownPending)
	case timedOut:
		d.m.ackTimeouts.Inc()
		d.retry(r, RetryAckTimeout)
	case v == verdictUnserved:
		d.notServed(r.sig, err)
		d.retry(r, RetryFailed)
	case v == verdictThrottle:
		d.throttle(delay)
		d.retryAfterPause(r)
	case v == verdictRetry:
		d.retryOutage(r)
	default:
		d.reject(r, err)
	}
}
