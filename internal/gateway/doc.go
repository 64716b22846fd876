// Package gateway builds and runs a whole otlpgate from a Config: the intake limiter, the
// destinations (client.Dest, client.Fleet, or the local file), the optional spool with one
// feeder per destination, the pipeline, the intakes (gRPC, OTLP/HTTP, Kafka, UDS) and the admin
// and profiling listeners. It owns their order of start and of shutdown (shutdown.go), what
// SIGHUP reloads (Reload), and the loss error a shutdown returns when something acknowledged
// was not delivered.
//
// cmd/otlpgate turns flags into a Config, handles the signals and chooses the exit status; the
// in-process tests and benchmarks (internal/zeroalloc, internal/reliability, internal/l7lb,
// bench/) build their gateways here too, so that what they measure is wired as the binary is.
//
// # Rules
//
// It imports every otlpgate package that takes part in the data path (fastpath, fastpath/pipeline,
// fastpath/tenant for the tenant table, fastpath/process for the router of a -dest's
// match=resource, client, client/filedest, spool, spool/feed, server/..., codec, pool,
// internal/bytesize), internal/credfile for the files it reads itself (-auth.tenants-file, the
// references of -dest.file lines), internal/statusmetrics for the registry it gives the status
// page, and nothing of cmd/ or bench/; only cmd/, bench/ and tests
// import it. It never exits the process.
//
// # Goroutines
//
// New builds every part and starts only what the parts start themselves (the pipeline's
// flusher, the spool's housekeeper). Start starts the destinations, the feeders and the
// listeners, plus one goroutine that watches the spool for a failure (Failed) and, with
// -dest.file, one that polls the file. A reload drains what it removed on goroutines of its own
// (destinations.go). Shutdown stops everything New, Start and the reloads started. New, Start
// and Shutdown are called once each, in that order, from one goroutine; the address accessors,
// Failed and Reload are safe for concurrent use once Start returned; reloads run one at a time
// and none after Shutdown began.
package gateway
