// Package admin serves otlpgate's operator endpoints on one HTTP listener: /metrics (Prometheus
// text format from the default registry, which every package registers its metrics in),
// /debug/pprof/, /healthz (the process runs) and /readyz (every intake is listening and the data
// path accepts data).
//
// It imports no other otlpgate package. Its HTTP server runs on its own goroutines; Start and
// Shutdown may be called from any goroutine.
package admin
