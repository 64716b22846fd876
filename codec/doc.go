// Package codec owns the gRPC codec that moves messages through pooled buffers, the raw message
// type of the proxy path, the gRPC compressors, and the wire formats of the other intakes (in
// sub-packages).
//
// # The codec
//
// New returns one encoding.CodecV2, named "proto" so that it can replace the default codec of a
// server (grpc.ForceServerCodecV2) or of a call (grpc.ForceCodecV2). It handles three kinds of
// message:
//
//   - vtprotobuf messages (SizeVT, MarshalToSizedBufferVT, UnmarshalVT): marshalled straight into
//     a buffer of the configured mem.BufferPool, unmarshalled from the received buffer without a
//     copy when gRPC hands over a single buffer;
//   - *Raw, bytes that are never decoded: a Raw holding a pool.Payload is sent without a copy,
//     by wrapping the payload's bytes and taking a reference that gRPC's transport gives back
//     when it has written them (see raw.go for the lifetimes);
//   - any other proto.Message, through google.golang.org/protobuf, so that health checks and
//     reflection keep working on a server that forces this codec.
//
// Marshal and the raw paths allocate nothing once the pools are warm; the proof is in
// alloc_test.go and the figures in codec_bench_test.go.
//
// Nothing is registered in init: internal/gateway decides, once per process. Install the codec per server or per call;
// RegisterCompressors (or RegisterCompressorsWith) registers gzip, zstd and snappy globally and,
// as gRPC requires of registration, must run before any server or client is created.
//
// # Compressors
//
// gzip, zstd and snappy are backed by github.com/klauspost/compress and registered under their
// standard names; "gzip" replaces grpc-go's own if both are linked. snappy uses the framing
// (stream) format, as the other gRPC snappy implementations do. Encoders and decoders are pooled;
// zstd ones run with concurrency 1 and so start no goroutines. The decompressed size is capped
// by gRPC itself: it reads at most the maximum receive message size plus one byte from a
// decompressor and rejects the message when that byte arrives (grpc.MaxRecvMsgSize, 4 MiB by
// default). With Config.Budget set, a decompressor also claims Config.InflateClaim
// bytes from the Budget before it inflates a message past FreeInflate, and gives them back when
// gRPC closes it (budget.go): the intake limiter's inflate budget, in otlpgate. zstd frames that ask for a window above Config.ZstdMaxWindow are rejected before any
// window is allocated. The gzip and zstd writers send a message that is already a compressed
// stream (fastpath's pass-through batches: gzip members, or zstd frames behind an empty
// skippable frame) as it is: its first byte, 0x1f or 0x57, begins no protobuf message
// (passthrough.go).
//
// WireDecompressor (wire.go) is the gRPC intake's decompressor for one encoding
// (grpc.RPCDecompressor): it inflates as the registered compressor does and keeps the message's
// compressed bytes behind the inflated ones, in the buffer's spare capacity, where the codec
// finds them for a received Raw (Raw.Wire): the intake's compressed pass-through.
//
// # Rules
//
// It may import pool/ and proto/ (tests also use internal/otlpgen); never server/, client/,
// fastpath/, cmd/ or bench/. It starts no goroutines. The codec and the compressors are safe for
// concurrent use, as gRPC requires; a Raw belongs to one goroutine at a time.
package codec
