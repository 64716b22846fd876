// Package admission holds what the two network intakes (server/grpc and server/http) decide
// the same way about a request that reached the pipeline: why it was refused (Reason), when
// refusals have lasted long enough to count as overload (Control), how long a refused client
// is told to wait, and the intake limiter's reservation for a body being received (Hold).
//
// How each reason is answered (a gRPC status with RetryInfo, an HTTP status with Retry-After)
// stays in each intake: only the decisions are shared, so that a fix to one cannot miss the
// other.
//
// It lives under internal/ rather than in fastpath because it is intake policy, not the
// pipeline's: fastpath admits bytes and knows nothing of protocols, clients or their retries,
// and the UDS and Kafka intakes, which answer refusals in their own ways, do not use it.
//
// It imports fastpath only. Every function runs on the intake's handler goroutine and is safe
// for concurrent use; nothing here allocates.
package admission
