package grpcserver

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec"
)

// A stream's requests are read on a goroutine of its own (the loop), so that the handler's
// goroutine is free to end the stream at shutdown while the loop waits in RecvMsg: gRPC offers
// no other way to interrupt a server-side receive than returning from the handler. The gate
// decides, without a lock, which of the two may still use the stream:
//
//  1. The loop moves busy → receiving before RecvMsg and receiving → busy after it.
//  2. The handler, once draining, moves receiving → stopped: it then owns the stream, answers
//     what the waiters still owe and returns. A loop that finds the gate stopped after RecvMsg
//     touches the stream no more; what it received is unanswered, and the client re-sends it.
//  3. If the handler finds the loop busy, the loop is handling a request: it answers it, sees
//     draining and ends the stream itself.
//
// The same holds for the stream's max age (otep.go), with expired in place of draining.
//
// Races: the handler stores draining before it tries the gate, and the loop re-reads draining
// after it moved to receiving. So either the handler's attempt sees receiving, or the loop sees
// draining before it blocks; a loop can never block in RecvMsg unseen by a draining handler.
type recvGate struct{ state atomic.Int32 }

const (
	gateBusy int32 = iota
	gateReceiving
	gateStopped
)

var drainedStreams = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_grpc_drained_streams_total",
	Help: "OTEP streams ended at shutdown while they waited for a request, after the answers they owed.",
})

var (
	// errDrained ends a stream whose loop noticed the shutdown before receiving.
	errDrained = errors.New("grpc: stream ended by shutdown")
	// errStopped tells the loop that the handler ended the stream.
	errStopped = errors.New("grpc: stream taken over by its handler")
	// errExpired ends a stream whose loop noticed -grpc.stream.max-age before receiving.
	errExpired = errors.New("grpc: stream reached its max age")
)

// recv receives the next request of a stream into raw. Called by the stream's loop only.
func (s *Server) recv(st *streamState, raw *codec.Raw) error {
	g := &st.gate
	if !g.state.CompareAndSwap(gateBusy, gateReceiving) {
		return errStopped
	}
	// Re-read after moving to receiving: a handler that found the loop busy relies on it.
	if s.draining.Load() || st.expired.Load() {
		if g.state.CompareAndSwap(gateReceiving, gateBusy) {
			if st.expired.Load() && !s.draining.Load() {
				return errExpired
			}
			// Idle at shutdown, like a stream the handler stops: counted the same.
			drainedStreams.Inc()
			return errDrained
		}
		return errStopped
	}
	err := st.stream.RecvMsg(raw)
	if !g.state.CompareAndSwap(gateReceiving, gateBusy) {
		raw.Release()
		return errStopped
	}
	return err
}

// stopIdle ends the stream for its handler if the loop waits in RecvMsg. Called by the handler
// only, after it set draining or expired; the caller counts the end.
func (g *recvGate) stopIdle() bool {
	return g.state.CompareAndSwap(gateReceiving, gateStopped)
}
