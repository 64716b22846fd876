// Package bench is the harness behind otlpbench: the Appendix B mirror of the OTLP
// specification (modes, latencies, batch shapes), the delay line that injects round-trip time on
// loopback, CPU and memory accounting from the operating system, and the reports and charts.
//
// Nothing imports bench/ but cmd/otlpbench. It may import every other otlpgate package. The delay
// line runs two goroutines per direction per connection; everything else runs on the caller's
// goroutine unless a function says otherwise.
package bench
