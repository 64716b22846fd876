// Package admin serves otlpgate's operator endpoints: on the admin listener /metrics (Prometheus
// text format from the default registry, which every package registers its metrics in),
// /healthz (the process runs) and /readyz (every intake is listening and the data path accepts
// data); on a profiling listener of its own, off by default and loopback only, /debug/pprof/
// without the command line (flags may carry secrets) and with bounded profile durations.
//
// It imports no other otlpgate package. Its HTTP server runs on its own goroutines; Start and
// Shutdown may be called from any goroutine.
package admin
