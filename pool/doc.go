// Package pool owns byte buffer pools and the reference-counted, immutable Payload that carries a
// batch from intake to every destination.
//
// It imports nothing of otlpgate. Everything in it is safe for concurrent use unless a method
// says otherwise; it starts no goroutines.
package pool
