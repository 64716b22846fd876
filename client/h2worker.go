package client

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// h2Worker is a unary sender of transport=otlpgate, for one signal: Concurrency of them per
// signal, as grpc-go's workers (unary.go). Its fields belong to its goroutine.
type h2Worker struct {
	d     *Dest
	sig   fastpath.Signal
	timer *time.Timer // waits in next and waitPause
	ack   *time.Timer // the ack timeout of the call under way
	st    *h2Stream
	comp  encoding.Compressor // nil: messages go as they are
	msg   h2Msg               // the message of the call under way
	resp  otepv1.ExportResponse
}

// h2MaxRefused bounds how often one attempt goes again at once because the server did not
// process it (GOAWAY below its stream, REFUSED_STREAM): past it the call fails as UNAVAILABLE
// and backs off like any other.
const h2MaxRefused = 8

func newH2Worker(d *Dest, sig fastpath.Signal) *h2Worker {
	w := &h2Worker{d: d, sig: sig, timer: stoppedTimer(), ack: stoppedTimer(), st: newH2Stream()}
	if c := d.cfg.compressor(); c != "" {
		w.comp = encoding.GetCompressor(c) // newDest checked it is registered
	}
	return w
}

func (w *h2Worker) run() {
	defer w.d.wg.Done()
	defer w.ack.Stop()
	for {
		r := w.d.next(w.sig, w.timer)
		if r == nil {
			return
		}
		w.call(r)
	}
}

func (w *h2Worker) call(r *request) {
	d := w.d
	if r.sig >= fastpath.NumSignals {
		d.drop(r, DropInvalid)
		return
	}
	if !d.waitPause(w.timer) {
		d.lose(r)
		return
	}
	if !d.sendsAsIs(r.b) {
		d.drop(r, DropInvalid)
		return
	}
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
	} else if r.b.PlainLen() > d.cfg.MaxSendMsgSize {
		d.drop(r, DropTooLarge)
		return
	}
	r.attempt++
	d.sending.Add(1)
	d.m.sentRequests.Inc()
	d.m.sentBytes.Add(float64(r.b.PlainLen()))

	var (
		reply    []byte
		err      error
		timedOut bool
	)
	segs, total, cerr := w.message(r, f)
	for refused := 0; cerr == nil; refused++ {
		var again bool
		reply, timedOut, again, err = w.attempt(r, segs, total)
		if !again {
			break
		}
		if refused == h2MaxRefused {
			err = status.Error(codes.Unavailable, "client: the upstream refused the call on every connection")
			break
		}
		d.m.unprocessed.Inc() // the server said it did not process it: no duplicate
	}
	w.msg.release()
	if f != nil {
		f.unref()
	}
	d.sending.Add(-1)
	switch {
	case cerr != nil:
		d.drop(r, DropInvalid) // a compressor that fails on a batch fails on it every time
	case err == errH2AnswerTooLarge:
		d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
		d.unreadableAnswer(r, "the answer's DATA")
	case err == nil && f != nil:
		// One call, one answer: it is r's whatever id it names (grpc-go's path, unary.go).
		w.resp.Reset()
		if uerr := w.resp.UnmarshalVT(reply); uerr != nil {
			d.unaryFailed(r, status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", uerr), false)
			return
		}
		d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
		if w.resp.Id != r.id {
			d.m.unknownAcks.Inc()
		}
		d.result(r, w.resp.ResultCode, w.resp.RetryDelayMs)
	case err == nil:
		d.unaryAnswered(r, reply)
	default:
		d.unaryFailed(r, err, timedOut)
	}
}

// attempt makes one call of r on the current connection. again: the server did not process
// it (GOAWAY, REFUSED_STREAM) or the connection took no new stream, so it may go again at once
// on another.
func (w *h2Worker) attempt(r *request, segs [][]byte, total int) (reply []byte, timedOut, again bool, err error) {
	d, st := w.d, w.st
	c, err := d.h2.get()
	if err != nil {
		if err == errH2Stopped {
			return nil, false, false, status.Error(codes.Canceled, err.Error())
		}
		return nil, false, false, status.Error(codes.Unavailable, err.Error())
	}
	hf, err := d.h2.frame(r.sig, r.b.Tenant)
	if err != nil {
		return nil, false, false, status.Error(codes.InvalidArgument, err.Error())
	}
	if !c.open(st, hf, nil) {
		return nil, false, true, nil
	}
	c.writeMsg(st, segs, total, true)
	r.sentAt = nanotime()
	w.ack.Reset(d.cfg.AckTimeout)
	select {
	case <-st.done:
	case <-w.ack.C:
		timedOut = true
		if !c.cancel(st) {
			<-st.done // answered as the timer fired
			timedOut = false
		}
	case <-d.ctx.Done():
		if c.cancel(st) {
			w.ack.Stop()
			return nil, false, false, status.Error(codes.Canceled, "client: destination stopping")
		}
		<-st.done
	}
	w.ack.Stop()
	if timedOut {
		return nil, true, false, status.Error(codes.DeadlineExceeded, errAckTimeout.Error())
	}
	if st.refused {
		return nil, false, true, nil
	}
	reply, err = st.result(w.comp, d.cfg.MaxRecvMsgSize)
	return reply, false, false, err
}

// message is the gRPC message of r as segments: the OTEP request of f when f is set (views
// of the batch's bytes), else the batch's bytes; compressed when the destination compresses,
// or as they are when the batch arrived compressed the way the destination sends
// (pass-through). Valid until w.msg.release.
func (w *h2Worker) message(r *request, f *frame) (segs [][]byte, total int, err error) {
	if f != nil {
		return w.msg.otep(f, w.comp)
	}
	body := r.b.Payload.Bytes()
	if w.comp != nil && r.b.Encoding != pipeline.EncodingNone {
		w.msg.segs = append(w.msg.segs[:0], grpcHead(w.msg.head[:5], len(body), true), body)
		return w.msg.segs, 5 + len(body), nil
	}
	return w.msg.raw(body, w.comp)
}
