// Package h2 is the wire of otlpgate's own HTTP/2 gRPC transport: frames parsed in place over
// the bytes a connection read. It is the base of the transport that is to replace grpc-go's for
// the methods otlpgate serves and calls; nothing in the proxy uses it yet.
//
// Frames. NextFrame splits a frame off a byte slice without copying; the typed views (Data,
// Headers, Settings, ...) check what RFC 9113 asks of one frame and return views of the same
// bytes. What they refuse carries the RFC's error code and whether it ends the connection or
// resets one stream (Error); every refusal is a pre-made value, so a peer's bad frames cost no
// allocation. A frame longer than the advertised SETTINGS_MAX_FRAME_SIZE is refused on its
// header, before its payload is read; PUSH_PROMISE is refused (otlpgate never takes push);
// unknown frame types are left to be skipped. Rules about a frame's place in the connection
// (stream states, CONTINUATION sequencing, windows) are the connection's, not this package's.
//
// Frame constants, flags, settings identifiers and error codes are golang.org/x/net/http2's,
// so that the transport and grpc-go speak of them by the same names.
//
// It imports no otlpgate package and starts no goroutines. Parsing functions are pure and safe
// for concurrent use.
package h2
