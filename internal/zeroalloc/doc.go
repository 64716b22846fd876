// Package zeroalloc holds otlpgate's end-to-end allocation proofs (test files only): a load
// client sends small batches over loopback gRPC or OTLP/HTTP (protobuf and JSON) to a complete
// otlpgate (intake, pipeline, a client destination), which forwards them over a pipelined OTEP
// stream or over unary v1 calls to a gRPC sink; allocattr counts every allocation of the run
// with its stack, and a test fails on any made by otlpgate's own code. The sink's and the load
// client's allocations are the harness's; grpc-go's, fasthttp's and the standard library's are
// allowed. Each test also checks that the sink received exactly the spans sent.
// TestUnaryCallStrictOwnAllocs counts a destination's unary calls under the strict rule of
// issue 24: a standard library allocation made for otlpgate's code is otlpgate's.
//
// Nothing imports it. Its test binary runs with runtime.MemProfileRate = 1 and the race
// detector off (it makes sync.Pool drop items on purpose); servers listen on 127.0.0.1.
package zeroalloc
