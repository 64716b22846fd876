package kafkacompress

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a decoder left a goroutine behind: zstd and lz4 decoders are
// created with concurrency 1 precisely so that they start none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
