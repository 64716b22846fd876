package uds

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// No goroutine of gnet's worker pool outlives the package's start: an idle process runs no
// ticker for a pool it never submits to. The server still serves (every other test here).
func TestGnetWorkerPoolReleased(t *testing.T) {
	testkit.WaitFor(t, "gnet's worker pool goroutines to end", func() bool {
		var b bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		return !strings.Contains(b.String(), "panjf2000/ants")
	})
}
