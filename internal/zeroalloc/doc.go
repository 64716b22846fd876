// Package zeroalloc holds otlpgate's end-to-end allocation proofs (test files only): a load
// client sends small batches over loopback gRPC or OTLP/HTTP (protobuf and JSON) to a complete
// otlpgate (intake, pipeline, a client destination), which forwards them over a pipelined OTEP
// stream or over unary v1 calls to a gRPC sink; allocattr counts every allocation of the run
// with its stack, and a test fails on any made by otlpgate's own code, counted strictly
// (allocattr.Allocator, issue 24): a standard library call that otlpgate's code makes (a
// context, a timer, a string built by fmt or strconv) allocates for otlpgate. The sink's and
// the load client's allocations are the harness's; grpc-go's and fasthttp's (the standard
// library calls they make included) are allowed. Each test also checks that the sink received
// exactly the spans sent. TestUnaryCallStrictOwnAllocs counts a destination's unary calls one
// at a time. The TestGRPCToOwnTransport tests put the destination on otlpgate's own gRPC client
// (transport=otlpgate), whose allocations, its HTTP/2 included, are otlpgate's own.
// TestOwnTransportLargeZeroAlloc needs no such split: a load on the own client, otlpgate, and a
// sink on the own server in front of a pipeline that discards, all of it otlpgate's transport
// at both ends, so the whole process may allocate nothing per large (multi-frame) request, and
// testing.AllocsPerRun says whether it does.
//
// Nothing imports it. Its test binary runs with runtime.MemProfileRate = 1 and the race
// detector off (it makes sync.Pool drop items on purpose); servers listen on 127.0.0.1.
package zeroalloc
