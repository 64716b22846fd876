// Package testkit is the one kit the tests of otlpgate share: destinations and consumers that keep
// exactly what they were given (Recorder, Discard), an OTLP/gRPC upstream on 127.0.0.1 that
// records every request it reads (GRPCSink), decoders of what they kept (SpanIDs, Traces, Metrics,
// Logs), a bounded wait for a condition (WaitFor), the bound addresses a child otlpgate reports in
// its log (WaitAddrs, with internal/listenlog) and loopback ports for children that cannot bind :0
// (FreeAddrs), the process's descriptor count (OpenFDs) and a clock that moves only when told
// (Clock).
//
// Only tests import it (internal/layout checks that no non-test file does). It imports
// fastpath, codec and proto/ of otlpgate (and so pool), internal/freeport and internal/listenlog, so that the
// tests of every intake, of client/, spool/ and cmd/ can use it. The internal tests of fastpath,
// codec and pool cannot (their packages are imported here): they keep small destinations of
// their own, and external tests (package fastpath_test) use the kit.
//
// Timer-driven logic that needs no network is tested inside a testing/synctest bubble rather
// than with a fake clock; Clock is for servers that must run on real sockets (the bubble does
// not allow network I/O) while their reporting periods and throttles are stepped by the test.
//
// Every exported method is safe for concurrent use: the recorders are called from the
// pipeline's and the intakes' goroutines while the test reads them.
package testkit
