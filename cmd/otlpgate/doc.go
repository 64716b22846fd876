// Command otlpgate is the telemetry edge proxy. `otlpgate -help` lists its flags;
// docs/configuration.md is the same list, generated from them.
//
// It wires the packages together: flags to Config values, intakes (server/grpc, server/uds,
// server/kafka), the pipeline (fastpath), destinations (client, client/filedest) and the admin
// endpoints, and handles signals (SIGINT/SIGTERM shut down in order, SIGHUP reloads the Kafka
// subscriptions). It is the only package that exits the process.
package main
