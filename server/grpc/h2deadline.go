package grpcserver

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A call's deadline on otlpgate's own transport. The client's grpc-timeout is read with the
// call's headers (open): a malformed one refuses the call INTERNAL with :status 400, one of
// zero refuses it DEADLINE_EXCEEDED, as grpc-go's transport refuses them. Otherwise the call
// has a deadline and a timer, made once per h2Stream, re-armed for each call that sends a
// grpc-timeout and stopped when the stream is dropped. An OTEP stream's is armed as it opens
// (armDeadline); a unary call's only once the read its headers came in is handled
// (armDeadlinesLocked), and only if the call is still open then: most unary calls come whole
// in one read and are answered in it, and a timer armed and stopped for each would cost more
// than the rest of the call's bookkeeping. When it fires the call ends whatever it is doing,
// as grpc-go ends it at its deadline: a unary call's here (unaryDeadlineLocked), an OTEP
// stream's in h2otep.go (streamDeadlineLocked).

var unaryDeadlines = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "otlpgate_grpc_unary_deadlines_total",
	Help: "Unary calls (v1 Export, OTEP UnaryExporter) of -grpc.transport=otlpgate ended because the grpc-timeout their client sent passed before they were answered, as grpc-go's handler ends them, by protocol (v1, otep_unary): DEADLINE_EXCEEDED while the message still arrived (it is dropped, its intake limiter reservation given back at once); RESOURCE_EXHAUSTED with RetryInfo while it waited for the intake limiter's room; DEADLINE_EXCEEDED (v1) or FailedRetryable (OTEP) while the admitted request waited for the upstream (-ack=upstream), also counted in otlpgate_grpc_refused_requests_total{reason=\"canceled\"}.",
}, []string{"protocol"})

var (
	unaryDeadlinesV1   = unaryDeadlines.WithLabelValues(kindNames[kindV1])
	unaryDeadlinesOTEP = unaryDeadlines.WithLabelValues(kindNames[kindOTEPUnary])
)

// setDeadline sets the deadline of a call whose client sent a grpc-timeout (a call without
// one has none); its timer is armed once the read is handled (armDeadlinesLocked).
func (c *h2Conn) setDeadline(st *h2Stream) {
	if st.timeout > 0 {
		st.deadline = time.Now().Add(st.timeout)
		c.unarmed = true
	}
}

// armDeadline sets the deadline of an OTEP stream whose client sent a grpc-timeout, and arms
// its timer at once.
func (c *h2Conn) armDeadline(st *h2Stream) {
	if st.timeout > 0 {
		st.deadline = time.Now().Add(st.timeout)
		c.startDeadlineTimer(st, st.timeout)
	}
}

// armDeadlinesLocked arms the timers of the calls a read opened with a deadline that are
// still open once it was handled. serve only, after each read.
func (c *h2Conn) armDeadlinesLocked() {
	if !c.unarmed {
		return
	}
	c.unarmed = false
	for _, st := range c.mu.streams {
		if !st.deadline.IsZero() && !st.deadlineArmed {
			c.startDeadlineTimer(st, time.Until(st.deadline))
		}
	}
}

// startDeadlineTimer arms the stream's timer to fire in d.
func (c *h2Conn) startDeadlineTimer(st *h2Stream, d time.Duration) {
	st.deadlineArmed = true
	if st.deadlineTimer == nil {
		st.deadlineTimer = time.AfterFunc(d, func() { c.deadlinePassed(st) })
	} else {
		st.deadlineTimer.Reset(d)
	}
}

// deadlinePassed ends the call whose grpc-timeout passed. It runs on the stream's timer.
func (c *h2Conn) deadlinePassed(st *h2Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || st.id == 0 || st.deadline.IsZero() || time.Now().Before(st.deadline) {
		return // a late run: the stream ended, or the timer was armed again for the next call
	}
	if st.os.on {
		c.streamDeadlineLocked(st)
	} else {
		c.unaryDeadlineLocked(st)
	}
	c.flushAsyncLocked()
}

// unaryDeadlineLocked ends a unary call whose grpc-timeout passed before it was answered, as
// grpc-go's handler ends it, state by state:
//   - its message still arriving (or not begun): trailers-only with DEADLINE_EXCEEDED
//     ("context deadline exceeded"), and a reset with NO_ERROR of a client whose side is still
//     open; what came of the message, and its reservation of the intake limiter and of the
//     connection's share, are given back at once;
//   - waiting for the intake limiter's room (waitRoom): the limiter's refusal
//     (RESOURCE_EXHAUSTED with RetryInfo), as grpc-go's handler, whose wait for room its
//     deadline ends, refuses it;
//   - waiting for the upstream (-ack=upstream): the wait ends and its waiter answers as the
//     wait's end is answered (v1: DEADLINE_EXCEEDED; OTEP: FailedRetryable), the request
//     counted refused (canceled).
//
// grpc-go's transport resets the call with CANCEL at its deadline instead when that comes
// before its handler's answer; a grpc-go client sees DEADLINE_EXCEEDED either way, by its own
// deadline. A call whose answer was decided before its deadline is left as it was, its answer
// free to go out however long it waits for the client's window: grpc-go's transport stops a
// call's timer once its handler wrote the call's status.
func (c *h2Conn) unaryDeadlineLocked(st *h2Stream) {
	if st.localDone || st.isPark {
		return
	}
	if st.otep {
		unaryDeadlinesOTEP.Inc()
	} else {
		unaryDeadlinesV1.Inc()
	}
	received := 0
	if st.msg != nil {
		received = len(*st.msg)
	}
	c.s.log.Info("grpc: call ended: its grpc-timeout passed", "peer", c.peer, "method", h2MethodName(st),
		"timeout", st.timeout, "received", received, "length", st.msgLen,
		"waiting_room", st.roomWait, "waiting_upstream", st.waiting)
	switch {
	case st.waiting:
		st.endWait()
	case st.roomWait:
		st.resetEnd = true // the rest of the message is not wanted
		c.answerError(st, c.s.busy(), http.StatusOK)
	default:
		st.resetEnd = true
		c.answerError(st, errDeadlineExceeded, http.StatusOK)
	}
}

// h2MethodName is the method of a unary call, for the log.
func h2MethodName(st *h2Stream) string {
	if st.otep {
		return h2OTEPPaths[st.sig]
	}
	return h2Paths[st.sig]
}

// parseGRPCTimeout reads a grpc-timeout value (1 to 8 digits and a unit); false when
// malformed (the call is then refused: malformedTimeout). A value past what a Duration holds
// is clamped.
func parseGRPCTimeout(v []byte) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	var n int64
	for _, c := range v[:len(v)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	unit, ok := timeoutUnit(v[len(v)-1])
	if !ok {
		return 0, false
	}
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64, true
	}
	return time.Duration(n) * unit, true
}

// timeoutUnit is the Duration of a grpc-timeout unit.
func timeoutUnit(u byte) (time.Duration, bool) {
	switch u {
	case 'H':
		return time.Hour, true
	case 'M':
		return time.Minute, true
	case 'S':
		return time.Second, true
	case 'm':
		return time.Millisecond, true
	case 'u':
		return time.Microsecond, true
	case 'n':
		return time.Nanosecond, true
	}
	return 0, false
}

// malformedTimeout is the refusal of a call whose grpc-timeout v does not parse, with the
// status and the words grpc-go's transport refuses it with, reason by reason in the order it
// checks them: the length, the unit, the digits.
func malformedTimeout(v []byte) error {
	s := string(v)
	var why string
	switch {
	case len(s) < 2:
		why = fmt.Sprintf("transport: timeout string is too short: %q", s)
	case len(s) > 9:
		why = fmt.Sprintf("transport: timeout string is too long: %q", s)
	default:
		if _, ok := timeoutUnit(s[len(s)-1]); !ok {
			why = fmt.Sprintf("transport: timeout unit is not recognized: %q", s)
		} else if _, err := strconv.ParseUint(s[:len(s)-1], 10, 64); err != nil {
			why = err.Error()
		}
	}
	return status.Errorf(codes.Internal, "malformed grpc-timeout: %v", why)
}
