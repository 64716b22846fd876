// Package l7lb proves otlpgate behind real Level 7 load balancers: nginx (grpc_pass over an
// HTTP/2 listener) and HAProxy (mode http, proto h2 on both sides), started from Debian's
// packages with the configurations of deploy/ and a pid file each test owns. An edge streams
// OTEP through the balancer to otlpgate gateways; the tests assert how the traffic spreads, that
// a gateway added by a reload takes its share, and that every admitted span arrives. v1 unary
// calls cross them too, for each pair of otlpgate's gRPC transports (the edge's destination,
// the gateways' intake), a reload mid-run included; and OTEP streams of an edge on the own
// client (transport=otlpgate), re-balanced, reloaded, and reset by nginx's body limit, and
// streams ended by gateways on either transport (-grpc.stream.max-age, nginx's body limit).
//
// StartNginx and StartHAProxy run the balancers for the tests and for otlpbench's rebalance
// scenario. Everything listens on 127.0.0.1. Without nginx or haproxy the tests skip with a
// message, except under CI=true, where they fail: CI installs both.
//
// It imports nothing of otlpgate outside its tests; nothing but tests and bench/ imports it.
package l7lb
