// Package httpserver (directory server/http) is otlpgate's OTLP/HTTP intake: POST /v1/traces,
// /v1/metrics and /v1/logs with protobuf or JSON bodies, as the OTLP specification's OTLP/HTTP
// section describes, served by fasthttp.
//
// The handler runs once a request's headers are in (fasthttp streams the body): it reads the
// body into a pooled buffer that takes its bytes from the process-wide intake limiter as it
// grows, and inflates a compressed body into one that does the same before anything is
// inflated into it, refusing with 429 when the limiter has no room within -intake.wait
// (body.go). Refusal reasons, overload episodes and Retry-After sizing are
// internal/admission's, shared with the gRPC intake.
//
// Protobuf bodies are never decoded: the handler takes the request body (or its decompressed
// form, in a pooled buffer), scans it with fastpath.ScanRequest at the
// configured depth and admits it through the pipeline.Admitter it was given (the pipeline, or
// with a spool the spool's admission), exactly as the gRPC intake does,
// malformed resource entries being dropped with a partial_success answer. JSON bodies are
// transcoded to the same bytes first. Answers are the empty Export*ServiceResponse, a
// partial_success, or a google.rpc.Status, in the encoding of the request.
//
// It imports fastpath/, codec/, pool/, proto/, internal/admission, internal/credfile,
// internal/bytesize and internal/statusmetrics (the metrics the status page reads); never client/, spool/ or cmd/.
// fasthttp serves each connection on a goroutine of its worker pool, and the handler runs there,
// one request at a time per connection; in -ack=upstream mode it blocks on the batch.
package httpserver
