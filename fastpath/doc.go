// Package fastpath owns the wire half of the data path: signals, scanning and re-tagging raw
// OTLP bytes, the generated walkers and the schema they follow, UTF-8 checks, OTLP/JSON
// transcoding, resource entries, and byte-level splits by key. Admission, batching and the
// hand-out to destinations are fastpath/pipeline's; the tenant table is fastpath/tenant's; the
// processing steps are fastpath/process's.
//
// It does no I/O and imports only pool/ and proto/ of otlpgate. Its functions run on the
// caller's goroutine; types that are shared say so on each method.
//
// # Raw scanning
//
// TopLevel is the one walker of a request's top level: ScanRequest, the conversions, admission,
// and the client's framing and the gRPC intake's partial admission all walk with it, so that
// they agree on what a well-formed top level is. ScanRequest checks an Export request without
// decoding it, to the depth the intake chooses, and counts its resource entries and items;
// AppendOTEP and AppendV1 move a request between the v1 layout (entries at field 1) and the
// OTEP layout (id at field 1, entries at field 2) by rewriting top-level tags. AppendEntries is
// how a request joins a batch: only its resource entries are copied, every other top-level
// field is stripped (and counted by the pipeline in otlpgate_fastpath_stripped_fields_total),
// so that no batch holds a field an upstream would refuse the whole batch for. None of them
// allocates or keeps a reference to its input, and all are safe for concurrent use. They return pre-made errors (ErrTruncated, ErrWireType, ...) and
// count nothing themselves: the intake that calls them knows the protocol and counts the
// rejection under its own label.
//
// # OTLP/JSON
//
// JSONTranscoder turns an OTLP/JSON Export request into the v1 protobuf bytes the rest of the
// path carries, in one pass over the body's bytes as a stream of tokens (jsonlex.go), driven by
// the JSON column of the schema (jsonschema.go): no tree of the body is built, and besides its
// output a call holds state that follows the nesting depth (jsonlen.go). It allocates nothing
// when reused and is owned by one goroutine at a time. The tree-based transcoder it replaced
// is kept in jsontree_test.go as the reference of FuzzJSONStreamEquivalence.
//
// The wire schema the scanner checks is a table in schema.go, transcribed from the .proto files
// under proto/ and tested against their compiled descriptors. Below the top level, ScanRequest
// runs walkers generated from that table (walk_gen.go, by the program fastpath/internal/walkgen,
// which reads the table from source: go generate ./fastpath), one per message and depth; the walker that interprets the table at run time is
// kept in refwalk_test.go as their reference, and FuzzScanEquivalence holds the two to the same
// counts and errors.
package fastpath
