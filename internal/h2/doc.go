// Package h2 is the wire of otlpgate's own HTTP/2 gRPC transport: frames parsed in place over
// the bytes a connection read, and HPACK (RFC 7541) header compression. The OTLP/gRPC intake
// serves on it with -grpc.transport=otlpgate (server/grpc's h2*.go) and a destination calls its
// upstream on it with transport=otlpgate (client's h2*.go); grpc-go stays the default of both.
//
// Frames. NextFrame splits a frame off a byte slice without copying; the typed views (Data,
// Headers, Settings, ...) check what RFC 9113 asks of one frame and return views of the same
// bytes. What they refuse carries the RFC's error code and whether it ends the connection or
// resets one stream (Error); every refusal is a pre-made value, so a peer's bad frames cost no
// allocation. A frame longer than the advertised SETTINGS_MAX_FRAME_SIZE is refused on its
// header, before its payload is read; PUSH_PROMISE is refused (otlpgate never takes push);
// unknown frame types are left to be skipped. Rules about a frame's place in the connection
// (stream states, CONTINUATION sequencing, windows) are the connection's, not this package's.
// Frame parsing is fuzzed against x/net's Framer (FuzzFramesAgainstXNet); it parts from it only
// where the RFCs ask: a stream that depends on itself is a stream error, a HEADERS frame whose
// padding overruns it ends the connection (its field block is lost, and with it the HPACK
// state), SETTINGS_NO_RFC7540_PRIORITIES must be 0 or 1.
//
// HPACK decoding. A Decoder allocates its memory once, bounded by its Config (the dynamic table
// as one ring, the fields it keeps), and nothing after. It keeps only the fields whose names the
// caller lists (for a gRPC server: the path, content-type, the encodings, the timeout, te, and
// the configured tenant and auth headers); every other field is decoded only as far as the
// dynamic table needs it and otherwise measured and checked, never copied. It refuses, as
// COMPRESSION_ERROR for the connection, what RFC 7541 calls decoding errors (bad indices,
// integers past 2^32-1, bad Huffman codes, the EOS symbol, bad padding, size updates after a
// field or above the advertised SETTINGS_HEADER_TABLE_SIZE, truncated blocks); and, for the
// stream only, a header list larger than the advertised SETTINGS_MAX_HEADER_LIST_SIZE, whose
// size is counted before anything is copied (an entry named ten thousand times costs its
// index bytes, not ten thousand copies: the decompression bomb), and still processed to its
// end so that the table stays in step with the peer's. It follows RFC 7541 where x/net's
// decoder does not (a size update after a field is refused even on an empty table; several
// before the first field are accepted), and is fuzzed against it everywhere else. With
// Config.Binary it also checks the value of every field named *-bin as grpc-go decodes gRPC
// binary metadata (ValidBinary, fuzzed against encoding/base64), once per dynamic table entry,
// and reports the last one that fails (BadBinary) for the caller to refuse the call. With
// Config.Request it holds every field, kept or not, to what x/net's Framer checks of a request
// as grpc-go reads it (names of lower-case token characters, values without control
// characters, pseudo-fields first and only a request's), the value's octets checked as it is
// read in place or Huffman-decoded, once per dynamic table entry; InvalidEnd tells the caller
// where the first field that failed ended, for a block whose next frame ends the connection on
// grpc-go (FuzzHPACKAgainstXNet holds the verdict to x/net's Framer).
//
// HPACK encoding. AppendHeaderBlock encodes fields without touching either end's dynamic
// table, so a HeadersFrame (a response's headers, its trailers, a call's headers per method)
// is built once and sent on any stream with only its stream id written.
//
// Frame constants, flags, settings identifiers and error codes are golang.org/x/net/http2's,
// so that the transport and grpc-go speak of them by the same names; x/net's hpack is the
// reference the decoder is fuzzed against (FuzzHPACKAgainstXNet) and the encoder tested with.
//
// It imports no otlpgate package and starts no goroutines. Parsing functions are pure and safe
// for concurrent use; a Decoder belongs to the goroutine that reads its connection.
package h2
