// Command otlpgate is the telemetry edge proxy. `otlpgate -help` lists its flags;
// docs/configuration.md is the same list, generated from them.
//
// It turns flags into a gateway.Config (internal/gateway builds and runs the whole proxy from
// it), handles signals (SIGINT/SIGTERM shut down in order, SIGHUP reloads what
// gateway.Reload reloads) and chooses the exit status. It is the only package that exits the
// process.
package main
