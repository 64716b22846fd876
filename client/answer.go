package client

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An answer is read within max-recv-msg-size (Config.MaxRecvMsgSize): grpc-go refuses a larger
// message itself, and the OTLP/HTTP sender a larger body. Such an answer comes from an upstream
// that took the request: a v1 server sends its response message only when the export
// succeeded, an OTEP one only once it decided, and an HTTP server a 2xx only for what it
// accepted. So the request is not a rejection, and sending it again would deliver it twice:
// it counts as delivered, the answer in otlpgate_client_unreadable_answers_total with a log
// line, and what the answer said (a partial success, an OTEP result code) is unknown.
//
// grpc-go's refusal is RESOURCE_EXHAUSTED, which is also what a server answers to a request
// over its own receive limit; but a server refuses a unary request before its handler runs, so
// before any response headers, with a trailers-only answer. The answer is ours to blame when
// the headers came and the status is the text grpc-go makes for its own limit, naming ours.
// Stream mode is left alone: a stream's headers come first whatever ends it, and a stream that
// breaks on an answer it cannot read sends what was pending on it again, which drops nothing.

// answerOverLimit reports whether err, from RecvMsg on the unary call cs, is grpc-go's refusal
// of an answer over max-recv-msg-size, after the upstream began to answer. Runs on the call's
// worker, on a failed call only.
func (d *Dest) answerOverLimit(cs grpc.ClientStream, err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted || !recvLimitMessage(st.Message(), d.cfg.MaxRecvMsgSize) {
		return false
	}
	// The call is over: Header does not wait. It is nil for a trailers-only answer.
	md, _ := cs.Header()
	return md != nil
}

// recvLimitMessage reports whether msg is one of grpc-go's refusals of a received message over
// limit: "grpc: received message larger than max (N vs. limit)", and the two it makes for a
// message that inflates past limit.
func recvLimitMessage(msg string, limit int) bool {
	if !strings.HasPrefix(msg, "grpc: ") || !strings.Contains(msg, "larger than max") {
		return false
	}
	l := strconv.Itoa(limit)
	return strings.HasSuffix(msg, " vs. "+l+")") || strings.HasSuffix(msg, "larger than max "+l)
}

// unreadableAnswer finishes r, which the upstream took and answered with more than
// max-recv-msg-size, as delivered. what says what was over the bound, for the log and the
// status page.
func (d *Dest) unreadableAnswer(r *request, what string) {
	d.m.unreadableAnswers.Inc()
	if d.unreadableLog.allow() {
		err := fmt.Errorf("client: the upstream's answer is over max-recv-msg-size (%d bytes) and was not read; the request counts as delivered: %s",
			d.cfg.MaxRecvMsgSize, what)
		d.noteError(err)
		d.log.Warn("upstream answer over max-recv-msg-size not read: the request counts as delivered",
			"signal", r.sig.String(), "items", r.items, "max_recv_msg_size", d.cfg.MaxRecvMsgSize, "answer", what)
	}
	d.deliver(r)
}
