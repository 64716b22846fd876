package pipeline

import (
	"testing"

	"go.uber.org/goleak"
)

// The pipeline starts a flusher goroutine; every test must leave none behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
