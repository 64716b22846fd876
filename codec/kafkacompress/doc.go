// Package kafkacompress owns the decompression of Kafka client payloads: the gzip, snappy (raw
// block and xerial framing), lz4 frame and zstd codecs that a Kafka client may apply to a
// PushTelemetry request (KIP-714), each with a hard cap on the decompressed size.
//
// It imports no otlpgate package, only the compression libraries (klauspost/compress,
// pierrec/lz4/v4); it must not import server/, client/, fastpath/ or cmd/.
//
// It starts no goroutines: every decoder runs synchronously on the caller's goroutine (zstd and
// lz4 decoders are created with concurrency 1), and a Decompressor is safe for concurrent use.
package kafkacompress
