package grpcserver

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
)

func retryInfo(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}
