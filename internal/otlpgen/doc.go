// Package otlpgen builds OTLP requests shaped like the batches of the OTLP specification's
// Appendix B benchmarks, for tests, benchmarks and the otlpbench load tool.
//
// It imports only proto/. A Generator is not safe for concurrent use: give each goroutine its own.
package otlpgen
