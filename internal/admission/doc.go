// Package admission holds what the intakes decide before and at admission.
//
// The intake limiter (Limiter, LimiterConfig, Account) bounds what every intake (gRPC,
// OTLP/HTTP, Kafka, UDS) holds before admission: bytes of bodies being received and
// decompressed, concurrent decodes, one gRPC connection's share. What -queue.max-bytes bounds
// after admission, it bounds before.
//
// The two network intakes (server/grpc and server/http) also decide alike about a request that
// reached admission: why it was refused (Reason), when refusals have lasted long enough to
// count as overload (Control), how long a refused client is told to wait, and the limiter's
// reservation for a body being received (Hold). How each reason is answered (a gRPC status
// with RetryInfo, an HTTP status with Retry-After) stays in each intake: only the decisions are
// shared, so that a fix to one cannot miss the other.
//
// It lives under internal/ rather than in fastpath because it is intake policy, not the
// pipeline's: fastpath admits bytes and knows nothing of protocols, clients or their retries.
// Control admits through the pipeline.Admitter interface, so the intakes work alike in front
// of a pipeline.Pipeline and, with a spool, in front of the spool's admission (spool/feed).
//
// It imports fastpath, fastpath/pipeline, fastpath/tenant, pool and internal/statusmetrics
// (the metrics the status page reads) only. Every function runs on
// the intake's goroutine (a handler, or an event loop that never waits) and is safe for concurrent
// use; nothing here allocates on the request path (Limiter.NewAccount allocates, once per
// connection).
package admission
