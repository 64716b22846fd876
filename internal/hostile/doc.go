// Package hostile holds the hostile-client suite: each test runs one attack, in a short and
// bounded form, against a real otlpgate process on loopback while a well-behaved client sends
// beside it, and asserts that the process lives, that its memory stays within the configured
// bounds plus a fixed overhead, and that the well-behaved client is answered throughout.
//
// The package has no code outside its tests. It builds cmd/otlpgate once per run (TestMain) and
// imports nothing of otlpgate but generated protobuf types and internal/otlpgen.
package hostile
