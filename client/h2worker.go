package client

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
)

// h2Worker is a unary sender of transport=otlpgate, for one signal: Concurrency of them per
// signal, as grpc-go's workers (unary.go). Its fields belong to its goroutine.
type h2Worker struct {
	d     *Dest
	sig   fastpath.Signal
	timer *time.Timer // waits in next and waitPause
	ack   *time.Timer // the ack timeout of the call under way
	st    *h2Stream
}

// h2MaxRefused bounds how often one attempt goes again at once because the server did not
// process it (GOAWAY below its stream, REFUSED_STREAM): past it the call fails as UNAVAILABLE
// and backs off like any other.
const h2MaxRefused = 8

func newH2Worker(d *Dest, sig fastpath.Signal) *h2Worker {
	return &h2Worker{d: d, sig: sig, timer: stoppedTimer(), ack: stoppedTimer(), st: newH2Stream()}
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
	if r.b.PlainLen() > d.cfg.MaxSendMsgSize {
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
	for refused := 0; ; refused++ {
		var again bool
		reply, err, timedOut, again = w.attempt(r)
		if !again {
			break
		}
		if refused == h2MaxRefused {
			err = status.Error(codes.Unavailable, "client: the upstream refused the call on every connection")
			break
		}
		d.m.resent.Inc() // the server said it did not process it: no duplicate, but counted
	}
	d.sending.Add(-1)
	switch {
	case err == errH2AnswerTooLarge:
		d.m.ackLatency.Observe(float64(nanotime()-r.sentAt) / 1e9)
		d.unreadableAnswer(r, "the answer's DATA")
	case err == nil:
		d.unaryAnswered(r, reply)
	default:
		d.unaryFailed(r, err, timedOut)
	}
}

// attempt makes one call of r on the current connection. again: the server did not process
// it (GOAWAY, REFUSED_STREAM) or the connection took no new stream, so it may go again at once
// on another.
func (w *h2Worker) attempt(r *request) (reply []byte, err error, timedOut, again bool) {
	d, st := w.d, w.st
	c, err := d.h2.get()
	if err != nil {
		if err == errH2Stopped {
			return nil, status.Error(codes.Canceled, err.Error()), false, false
		}
		return nil, status.Error(codes.Unavailable, err.Error()), false, false
	}
	if !c.open(st, d.h2.headers[r.sig]) {
		return nil, nil, false, true
	}
	c.writeData(st, r.b.Payload.Bytes())
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
			return nil, status.Error(codes.Canceled, "client: destination stopping"), false, false
		}
		<-st.done
	}
	w.ack.Stop()
	if timedOut {
		return nil, status.Error(codes.DeadlineExceeded, errAckTimeout.Error()), true, false
	}
	if st.refused {
		return nil, nil, false, true
	}
	reply, err = st.result()
	return reply, err, false, false
}
