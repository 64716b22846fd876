// Package fastpath owns the core of the data path: scanning and re-tagging raw OTLP bytes,
// admission into byte-bounded queues, batching by concatenation, and fan-out of sealed batches to
// the destinations as reference-counted payloads.
//
// It does no I/O and must not import server/, client/, cmd/ or bench/. Its functions run on the
// caller's goroutine; types that are shared say so on each method.
package fastpath
