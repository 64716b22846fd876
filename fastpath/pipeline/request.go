package pipeline

import "github.com/otlpgate/otlpgate/fastpath"

// Request is one request on its way from an intake through admission: what it is (Signal,
// Layout, Items), where it came from (Origin), its bytes (Body; Wire when it arrived
// compressed) and who owns them (Own). An intake fills one per request and hands it whole to
// Admitter.Admit, which decides from its fields which way it goes (copied, adopted, passed
// through compressed): a new property of a request is a field here, read where admission
// needs it, not a method on every admitter and a case in every intake.
//
// It is passed by value: a dozen words, copied rather than pointed to, so that handing a
// request to an admitter behind an interface allocates nothing. The slices it holds are the
// caller's, read only during the call (Own aside: see there).
type Request struct {
	// Signal is the request's signal: traces, metrics or logs.
	Signal fastpath.Signal
	// Origin is its tenant and client address; the zero value is the default tenant with no
	// address.
	Origin Origin
	// Body is the request in Layout, already scanned (for one that arrived compressed: its
	// decompressed bytes). An OTEP request is re-tagged to v1 on its way into a batch.
	Body []byte
	// Layout is Body's message: a v1 Export*ServiceRequest (the zero value) or an OTEP request.
	Layout fastpath.Layout
	// Items is the number of spans, data points or log records Body holds.
	Items int
	// Wire, with Encoding other than EncodingNone, is the request as received, compressed in
	// Encoding: a v1 request whose decompressed form is Body. An admitter that keeps
	// compressed requests (Pipeline, the spool's admission) lets it travel as it arrived when
	// nothing would rewrite it and every destination that takes it sends Encoding as it is
	// (compressed pass-through, passthrough.go); else Body is admitted.
	Wire     []byte
	Encoding Encoding
	// Own, when not nil, is a buffer of pool's byte pools the caller holds whose bytes are all
	// of Body, a v1 request (the OTLP/HTTP body as read, gRPC's contiguous copy of a message
	// that arrived in several frames). When the request opens a batch of its own and its v1
	// form is its bytes (nothing to strip, re-tag or process), the batch takes the buffer over
	// and *Own is given, in exchange, an empty pooled buffer; otherwise Body is copied and
	// *Own left as it was (adopt.go). Either way the caller must not read Body after an
	// admission, and still returns *Own to the pool when done with it, as it would have.
	Own *[]byte
}
