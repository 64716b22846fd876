// Package ocdaemon owns the wire format of the OpenCensus PHP daemon protocol as the real
// OpenCensus PHP DaemonClient writes it: the message header, the Splitter that cuts a unix-socket
// byte stream into frames and recovers from truncated messages, the payload decoders of the binary
// message types, and encoders that append the same bytes (used by tests, fuzz seeds and
// benchmarks).
//
// Where the client differs from the protocol text it follows the client: uvarints are Go-style
// little-endian 7-bit groups, STATS_RECORD int values are uvarints, payload floats are float64
// big-endian, and the header time may be a float32 padded with two zero bytes on each side.
//
// Of otlpgate it imports only pool/ (the carry buffers are pooled byte buffers), and it starts
// no goroutines. A Splitter and the decode targets are
// owned by one goroutine (the event loop of the connection); decoded byte slices point into the
// frame and stay valid only as long as the frame does.
package ocdaemon
