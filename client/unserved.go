package client

import (
	"fmt"
	"math/bits"

	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
)

// An upstream that answers a call with UNIMPLEMENTED, or a POST with 404, does not serve what
// the destination sends: a Collector asked for otlpgate's own OTEP service, a gRPC port given
// to protocol=http, an OTLP/HTTP base path that is not there, a backend without one signal's
// pipeline. No request is to blame and none would ever get through, so dropping them as
// rejected would turn every acknowledged request into a loss until someone noticed. The
// destination treats it as the configuration error it is: the signal is marked unserved
// (otlpgate_client_unserved_signals, which shows the destination down), the last error and
// one log line say what to change, and its requests are kept and sent again after the backoff
// as in an outage (held in the queue, then backpressure; with a spool, on disk), until the
// upstream serves the signal (the first delivery clears the mark) or a reload replaces the
// destination.

// notServed marks sig unserved: cause is the upstream's answer to a request of it. The error
// a destination shows from then on names the call and what to change; the log says it once,
// when the mark is set.
func (d *Dest) notServed(sig fastpath.Signal, cause error) {
	err := &unservedError{call: d.call(sig), cause: cause, fix: d.fix()}
	d.noteError(err)
	bit := uint32(1) << sig
	for {
		old := d.unserved.Load()
		if old&bit != 0 {
			return
		}
		if d.unserved.CompareAndSwap(old, old|bit) {
			break
		}
	}
	if d.stopping() {
		return
	}
	msg, _ := d.LastError() // redacted
	d.log.Error("the upstream does not serve what this destination sends: its requests are kept and sent again until the configuration or the upstream is fixed",
		"signal", sig.String(), "err", msg)
}

// served clears sig's unserved mark, after a delivery of it. Called on every delivery: one
// atomic load while nothing is marked.
func (d *Dest) served(sig fastpath.Signal) {
	bit := uint32(1) << sig
	for {
		old := d.unserved.Load()
		if old&bit == 0 {
			return
		}
		if d.unserved.CompareAndSwap(old, old&^bit) {
			break
		}
	}
	d.log.Info("the upstream serves the signal again", "signal", sig.String())
}

// unservedSignals is how many signals the upstream does not serve now. Safe for concurrent use.
func (d *Dest) unservedSignals() int { return bits.OnesCount32(d.unserved.Load()) }

// call names what a request of sig is sent to: the gRPC method, or the URL POSTed to.
func (d *Dest) call(sig fastpath.Signal) string {
	if d.http != nil {
		return "POST " + d.http.uris[sig]
	}
	return d.methods[sig]
}

// fix says what to change when the upstream does not serve what the destination sends.
func (d *Dest) fix() string {
	switch d.cfg.Protocol {
	case ProtocolOTEP:
		return "protocol=otep is otlpgate's own service, which only otlpgate serves: for an OpenTelemetry Collector or any other OTLP receiver, leave protocol out (or set protocol=v1, standard OTLP/gRPC)"
	case ProtocolHTTP:
		return "no OTLP/HTTP receiver at this path: check the endpoint's base path (the signal's /v1/... is appended to it) or set traces-path, metrics-path and logs-path; for an OTLP/gRPC receiver give endpoint=host:port without a scheme (protocol=v1); or enable this signal's pipeline upstream"
	default:
		return "it is not an OTLP/gRPC receiver, or not for this signal: for an OTLP/HTTP receiver give endpoint=http://host:port (protocol=http), for the gRPC one use its port (4317 by convention); or enable this signal's pipeline upstream"
	}
}

// unservedError is the failure a destination shows for an unserved signal.
type unservedError struct {
	call  string
	cause error
	fix   string
}

func (e *unservedError) Error() string {
	msg := e.cause.Error()
	if st, ok := status.FromError(e.cause); ok {
		msg = st.Code().String() + ": " + st.Message()
	}
	return fmt.Sprintf("the upstream does not serve %s (%s): %s", e.call, msg, e.fix)
}
