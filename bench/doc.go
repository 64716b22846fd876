// Package bench is the harness behind otlpbench: the Appendix B mirror of the OTLP
// specification (modes, latencies, batch shapes), the delay line that injects round-trip time on
// loopback, the anchor (proxies pinned to one CPU against a TCP relay), CPU and memory
// accounting from the operating system, and the reports and charts.
//
// Nothing imports bench/ but cmd/otlpbench. It may import every other otlpgate package. The delay
// line runs two goroutines per direction per connection, the relay one per direction per
// connection and the anchor's open-loop load one per request in flight; everything else runs on
// the caller's goroutine unless a function says otherwise.
package bench
