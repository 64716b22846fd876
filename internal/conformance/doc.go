// Package conformance proves that otlpgate's generated OTLP v1 and OTEP code under proto/ is
// wire-compatible with the reference Go bindings, go.opentelemetry.io/proto/otlp.
//
// otlpgate forwards OTLP bytes it never decodes and builds OTLP with vtprotobuf marshalers, so
// any drift between its schema copy and the reference one would corrupt data silently. The tests
// here check three things:
//
//  1. Schema: every message, enum and service of the reference files has the same descriptor
//     in ours (names, numbers, kinds, cardinality, oneofs, proto3 optional, reserved ranges,
//     methods), and nothing extra.
//  2. Encoding: requests generated at random with the reference types, for every signal,
//     decode with ours (vtprotobuf and protobuf-go paths) and re-encode to the reference's
//     deterministic bytes exactly; ours decode with the reference to an equal message; EqualVT
//     and CloneVT agree with proto.Equal; unknown fields survive byte for byte; batches made by
//     concatenating encoded requests decode to the union of their entries.
//  3. OTEP: an OTEP request is the id at field 1 followed by the v1 request's entries re-tagged
//     from field 1 to field 2, which is what fastpath relies on when it re-tags without decoding.
//
// Known divergences of vtprotobuf from protobuf-go are pinned by their own tests (float_test.go)
// and kept out of the random generator: a negative zero in a double field without presence is
// dropped by MarshalVT, and EqualVT compares doubles with ==, so a NaN is never EqualVT to itself.
//
// The package holds only tests; it has no exported API and no configuration. Its test binary
// links both schemas, so every test file blank-imports internal/protoreg. Nothing may import
// this package. The tests run on the test goroutine and start no goroutines.
package conformance
