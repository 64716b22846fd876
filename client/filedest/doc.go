// Package filedest is otlpgate's default destination when no upstream is configured: it writes
// every batch to a local file as OTLP/JSON, one export request per line, rotating the file by
// size, and logs a one-line summary at a fixed interval.
//
// It imports fastpath/ and proto/ only. One writer goroutine owns the file; Enqueue is safe for
// concurrent use.
package filedest
