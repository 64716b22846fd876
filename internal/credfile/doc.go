// Package credfile reads the credentials the intakes take from files: the server side of TLS
// (certificate, key, and the client CA that turns on mutual TLS), bearer tokens, and the tokens
// files that bind each of many tokens to what it stands for (-auth.tenants-file). Every intake
// builds them here, so that the gRPC and the HTTP intake cannot come to differ in what they
// accept; the destinations (client/) read their bearer-token-file here too. Expand resolves the
// ${env:NAME} and ${file:PATH} references of every flag value and -dest.file line
// (cmd/otlpgate, internal/gateway), so that secrets have one reader.
//
// It imports only the standard library. Its functions run at start, and Bindings again on
// each reload, on the caller's goroutine.
package credfile
