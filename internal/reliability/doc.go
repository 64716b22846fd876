// Package reliability holds otlpgate's fault and overload tests (test files only): a load
// client sends spans to a complete otlpgate (gRPC intake, pipeline, client destinations) whose
// upstreams sit behind a fault proxy, and each scenario checks the promises RELIABILITY.md
// states: every span acknowledged to the client reaches the upstream at least once, duplicates
// are counted, and the queued bytes never exceed their bound.
//
// Nothing imports it. Its tests start servers on 127.0.0.1 and bound every loop.
package reliability
