// Package faultproxy is a TCP proxy for tests that injects network faults between a client and
// a server on loopback: added delay, cutting every connection (FIN), resetting them (RST),
// black-holing (bytes are read and dropped, nothing is answered, connections stay open), and
// refusing new connections. Faults can be switched at any time while traffic flows.
//
// Only tests import it. Each proxied connection runs two copying goroutines; Close stops them
// all.
package faultproxy
