// Command walkgen writes fastpath/walk_gen.go, the scanner's generated walkers, from the wire
// schema table in fastpath/schema.go (see package fastpath/internal/gen). It reads fastpath's
// source and never compiles the package, so it runs whatever state walk_gen.go is in.
//
//	go generate ./fastpath                  (runs: go run ./internal/walkgen)
//	go run ./fastpath/internal/walkgen -dir fastpath -out /tmp/walk_gen.go
//
// It imports fastpath/internal/gen only; nothing imports it.
package main
