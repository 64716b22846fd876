// Package grpcserver (directory server/grpc) is otlpgate's OTLP/gRPC intake. One gRPC server
// serves the standard v1 collector services (opentelemetry.proto.collector.{trace,metrics,logs}.v1)
// and the original proposal's otlpgate.otep.v1 UnaryExporter and StreamExporter.
//
// Requests are never decoded: the handlers receive the request bytes through codec.Raw, scan
// them with fastpath.ScanRequest (validation and item counts), and admit them through the
// pipeline.Admitter it was given (the pipeline, or with a spool the spool's admission), OTEP
// requests being re-tagged to the v1 layout on the way in.
// Responses are small typed messages marshalled by the vtprotobuf codec.
//
// Before a unary call's message is read it reserves the largest message from the intake
// limiter, within its connection's share; a sweep closes connections whose reservations see no
// progress (intake.go, connbudget.go). Compressed messages inflate into the limiter's inflate
// budget through the codec's compressors (InflateBudget).
//
// It imports fastpath/, codec/, pool/, proto/, internal/credfile, internal/bytesize,
// internal/statusmetrics (the metrics the status page reads) and
// internal/admission (the intake limiter; refusal reasons, overload episodes and the limiter's
// hold, shared with the HTTP intake) and internal/h2 (the wire of its own HTTP/2 transport,
// -grpc.transport=otlpgate); never client/, spool/ or cmd/.
// gRPC runs each call on its own goroutine; a stream's requests are read, admitted and answered on a loop goroutine of
// the stream's own, so that its handler's goroutine can end it at shutdown or at its max age
// while it waits for a request (drain.go); in -ack=upstream mode up to -grpc.stream.window waiter
// goroutines wait for delivery and one sender goroutine per stream answers (otep.go). The
// limiter's progress sweep runs on a goroutine of its own while the server serves.
//
// With -intake.headers a call's tenant is read from its metadata before its first message
// (a stream's once), in place: grpc-go's own metadata map is found through the key it files
// it under, learnt once at start (tenant.go), so that reading a known tenant allocates nothing.
//
// With -grpc.transport=otlpgate the listener is served by otlpgate's own HTTP/2 transport on
// internal/h2 instead (h2server.go, h2conn.go, h2stream.go, h2otep.go, h2answer.go): h2c
// with prior knowledge or TLS with ALPN h2, the three v1 Export methods and the OTEP
// UnaryExporter and StreamExporter (any other method is answered UNIMPLEMENTED). One goroutine
// per connection (its TLS handshake too) reads, decodes, admits a unary call, or each message
// of an OTEP stream, on the spot through the same steps as the grpc-go handlers
// (authorizeMeta, originMeta, admitV1, v1Error, admitOTEPUnary, otepUnaryAnswer, admitOTEP)
// and writes the answers of one read in one write, from frames built once; with -ack=upstream
// a goroutine per call (per stream message) waits for the upstream and answers. Timers
// (time.AfterFunc) of each connection run its keepalive and -grpc.max-connection-age, of
// each OTEP stream its -grpc.stream.max-age and -grpc.stream.answer-timeout, and of each call,
// unary or stream, its grpc-timeout (h2deadline.go).
//
// Beside gRPC's own limits the intake bounds what hostile clients can make it hold: every
// accepted connection is wrapped (conns.go) for the per-peer cap and a watch of its HTTP/2 frames
// (watch.go) that times and sizes unfinished messages, enforced by one sweep goroutine per
// server and on gRPC's reader goroutine; OTEP answers go out of per-stream slots whose return
// gRPC reports (answers.go).
package grpcserver
