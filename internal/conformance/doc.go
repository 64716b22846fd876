// Package conformance proves that otlpgate's generated OTLP v1 and OTEP code under proto/ is
// wire-compatible with the reference Go bindings, go.opentelemetry.io/proto/otlp.
//
// otlpgate forwards OTLP bytes it never decodes and builds OTLP with vtprotobuf marshalers, so
// any drift between its schema copy and the reference one would corrupt data silently. The
// tests check:
//
//  1. Schema (descriptor_test.go): every message, enum and service of the reference files has
//     the same descriptor in ours (names, numbers, kinds, cardinality, oneofs, proto3
//     optional, reserved ranges, methods), and nothing extra.
//  2. Encoding (roundtrip_test.go, unknown_test.go): requests generated at random with the
//     reference types, for every signal, decode with ours (vtprotobuf and protobuf-go paths)
//     and re-encode to the reference's deterministic bytes exactly; ours decode with the
//     reference to an equal message; EqualVT and CloneVT agree with proto.Equal; unknown
//     fields survive byte for byte; concatenated requests decode to the union of their
//     entries, as batching assumes. coverage_test.go proves the generator sets, and leaves
//     absent, every field of the schema.
//  3. OTEP (otep_test.go): an OTEP request is the id at field 1 followed by the v1 request's
//     entries re-tagged from field 1 to field 2, which fastpath relies on when it re-tags
//     without decoding.
//  4. Malformed input (decode_test.go): a differential fuzz target feeds both decoders the
//     same bytes; they must agree on accept or reject and on the decoded message.
//  5. OTLP/JSON (json_test.go): random requests rendered as OTLP/HTTP clients send JSON (hex
//     ids, enums as numbers or names, either key spelling, 64-bit integers as strings or
//     numbers, unknown fields) transcode with fastpath.JSONTranscoder to exactly the
//     reference's deterministic bytes.
//
// Where vtprotobuf departs from protobuf-go, a test pins the difference and fails once it is
// gone: a negative zero in a double without presence is dropped by MarshalVT, EqualVT never
// equates NaN with itself (float_test.go); UnmarshalVT accepts several malformed inputs that
// protobuf-go rejects and rejects a wrong wire type that protobuf-go keeps as an unknown field
// (divergence_test.go). The random generator avoids the first two; the fuzz target tolerates
// exactly the others.
//
// The package holds only tests: no exported API, no configuration. Its test binary links both
// schemas, so every test file blank-imports internal/protoreg. Nothing may import this package.
// The tests run on the test goroutine and start no goroutines.
package conformance
