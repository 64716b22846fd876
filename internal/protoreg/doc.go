// Package protoreg lets a test binary link otlpgate's generated OTLP types next to the reference
// ones from go.opentelemetry.io/proto/otlp (the conformance tests, and the OpenTelemetry SDK
// exporters used as clients in integration tests).
//
// Both sets register the same protobuf full names in the global registry, which panics on the
// second registration by default. Importing this package for its side effect switches the
// registry's conflict policy to "ignore" before either set registers: Go initialises the
// lexically first package whose imports are ready, this package needs only os, and its import
// path sorts before go.opentelemetry.io and google.golang.org. The registry then keeps whichever
// set registered first; both sets still marshal and unmarshal through their own descriptors,
// which is all the tests need (nothing looks OTLP types up by name).
//
// Only tests import it. The otlpgate binary links one schema and never needs it. It starts no
// goroutines.
package protoreg

import "os"

func init() {
	if os.Getenv(conflictEnv) == "" {
		os.Setenv(conflictEnv, "ignore")
	}
}

// conflictEnv is read by google.golang.org/protobuf/reflect/protoregistry on every conflict.
const conflictEnv = "GOLANG_PROTOBUF_REGISTRATION_CONFLICT"
