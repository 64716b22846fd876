// Package codec owns the gRPC codecs (vtprotobuf messages on pooled buffers, and raw bytes that
// are never decoded), the gRPC compressors, and the wire formats of the other intakes.
//
// It may import pool/ and proto/ only. It starts no goroutines; codecs and compressors are safe
// for concurrent use as gRPC requires.
package codec
