package grpcserver

import (
	"context"
	"crypto/subtle"

	"google.golang.org/grpc/metadata"
)

// checkToken compares the call's authorization metadata with want in constant time. The token
// is never logged.
func checkToken(ctx context.Context, want string) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return false
	}
	for _, v := range md.Get("authorization") {
		if subtle.ConstantTimeCompare([]byte(v), []byte(want)) == 1 {
			return true
		}
	}
	return false
}
