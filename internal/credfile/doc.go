// Package credfile reads the credentials the intakes take from files: the server side of TLS
// (certificate, key, and the client CA that turns on mutual TLS) and bearer tokens. Every intake
// builds them here, so that the gRPC and the HTTP intake cannot come to differ in what they
// accept.
//
// It imports only the standard library. Its functions run once at start, on the caller's
// goroutine.
package credfile
