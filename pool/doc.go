// Package pool owns the byte buffer pools and the reference-counted, immutable Payload that
// carries a batch from intake to every destination.
//
// # Byte pools
//
// GetBytes and PutBytes serve *[]byte from seventeen tiers, 1 KiB to 64 MiB in powers of two,
// each a sync.Pool. A request is served by the smallest tier whose capacity covers it, so the
// buffer never has to grow while the caller fills it; PutBytes files a buffer under the largest
// tier its capacity covers, so a buffer grown by append is still reused. The largest tiers hold
// the bodies of the largest requests the intakes accept (-http.max-request-bytes is 64 MiB) and
// their decompressed copies: under a burst of them, a buffer dropped after each request would
// be garbage the collector lets grow to the live heap's size before it runs, where a pooled one
// is taken again by the next request, so the process holds about what the intake limiter lets
// it hold. Requests above 64 MiB are allocated and dropped again on put.
//
// A sync.Pool drops what sat unused through two collections, and gRPC's garbage makes a busy
// proxy collect every few milliseconds, so a pool alone comes up short after every lull and at
// every peak a little above the last, and Get allocates. Each tier therefore also keeps a small
// reserve the collector never empties (512 buffers up to 32 KiB, fewer above, 64 of 256 KiB,
// 2 of 1 MiB, one of 2 MiB, none larger; 64 MiB at most, of buffers once in use), filled first by
// PutBytes while it has room and drawn on only when the pool is empty; payloads keep one of 256.
// Sizes are constants, not configuration, so that finding a tier is a bit-length computation;
// the package has no Config.
//
// Objects that are not bytes recycle through a FreeList where a collection would otherwise cost
// allocations: a bounded stack the collector never empties, sized to what may be in use at
// once.
//
// github.com/valyala/bytebufferpool is not used for the tiers. Its pool calibrates one default
// size and one maximum size from what a single call site asked for recently, which suits one
// growing buffer with a stable size (a response writer) but not this mix: a 1 KiB response and a
// 4 MiB batch would share a calibration, Get could not promise cap >= size, and buffers above the
// calibrated maximum would silently stop being pooled. It also pools *ByteBuffer, and the
// house rule is to pool *[]byte.
//
// # Payload
//
// A Payload starts with one reference held by its builder, who may append to Buf until the
// first Retain shares it; from then on it is immutable. Every holder calls Release once; the last
// Release returns the bytes and the Payload to their pools.
//
// # Checked builds
//
// Built with -race or -tags invariants, Checked is true and the package verifies the reference
// discipline: Bytes, Buf or Retain after the last Release panic with "BUG: pool: payload used
// after release", a second Release panics with "BUG: pool: payload released twice". To make
// stale holders fail reliably, a released Payload is poisoned (its count set far below zero, its
// bytes overwritten) and kept out of both pools, so no later owner can mask the mistake. Plain
// builds keep only the checks that cost nothing (a Retain or Release that drives the count below
// its possible range).
//
// # Rules
//
// It imports nothing of otlpgate and no gRPC. It starts no goroutines. GetBytes, PutBytes,
// NewPayload, Retain, Release, Refs and Bytes are safe for concurrent use; Buf belongs to the
// single owner of an unshared Payload.
package pool
